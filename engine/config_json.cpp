// Config::to_json: the config as used, in DeepSpeed's key names, so a run's output directory
// records exactly what ran (every default filled in) and can be fed back as a config.
#include <charconv>
#include <variant>

#include "engine/config.h"
#include "nn/json.h"

namespace fathom {
namespace {

std::string number(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round-trip form
  std::string text(buffer, result.ptr);
  // Keep it a float on the way back in (1 -> 1.0), as Python's json.dumps writes it.
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

// Writes one JSON object at a time; members are added in the order DeepSpeed documents them.
class ObjectWriter {
 public:
  ObjectWriter(std::string& out, int indent) : out_(out), indent_(indent) { out_ += "{"; }
  ~ObjectWriter() {
    if (!first_) out_ += "\n" + std::string(indent_, ' ');
    out_ += "}";
  }
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;

  void raw(const std::string& key, const std::string& json) {
    start(key);
    out_ += json;
  }
  void integer(const std::string& key, int64_t value) { raw(key, std::to_string(value)); }
  void real(const std::string& key, double value) { raw(key, number(value)); }
  void flag(const std::string& key, bool value) { raw(key, value ? "true" : "false"); }
  void string(const std::string& key, const std::string& value) {
    start(key);
    nn::json::append_quoted(out_, value);
  }
  void null(const std::string& key) { raw(key, "null"); }
  // Starts a nested object: construct an ObjectWriter on out() with indent() right after.
  void key(const std::string& key) { start(key); }
  std::string& out() { return out_; }
  int indent() const { return indent_ + 2; }

 private:
  void start(const std::string& key) {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
    out_ += std::string(indent_ + 2, ' ');
    nn::json::append_quoted(out_, key);
    out_ += ": ";
  }
  std::string& out_;
  int indent_;
  bool first_ = true;
};

std::string optimizer_value(const nn::OptimizerValue& value) {
  if (const bool* flag = std::get_if<bool>(&value.value())) return *flag ? "true" : "false";
  if (const double* real = std::get_if<double>(&value.value())) return number(*real);
  std::string list = "[";
  for (double item : std::get<std::vector<double>>(value.value())) list += (list.size() > 1 ? ", " : "") + number(item);
  return list + "]";
}

std::string schedule_value(const nn::LRParamValue& value) {
  const auto& v = value.value();
  if (const bool* flag = std::get_if<bool>(&v)) return *flag ? "true" : "false";
  if (const int64_t* integer = std::get_if<int64_t>(&v)) return std::to_string(*integer);
  if (const double* real = std::get_if<double>(&v)) return number(*real);
  std::string quoted;
  nn::json::append_quoted(quoted, std::get<std::string>(v));
  return quoted;
}

void write_offload_param(ObjectWriter& parent, const OffloadParamConfig& c) {
  parent.key("offload_param");
  ObjectWriter w(parent.out(), parent.indent());
  w.string("device", c.device);
  if (c.nvme_path.empty()) w.null("nvme_path");
  else w.string("nvme_path", c.nvme_path);
  w.integer("buffer_count", c.buffer_count);
  w.integer("buffer_size", c.buffer_size);
  w.integer("max_in_cpu", c.max_in_cpu);
  w.flag("pin_memory", c.pin_memory);
}

void write_offload_optimizer(ObjectWriter& parent, const OffloadOptimizerConfig& c) {
  parent.key("offload_optimizer");
  ObjectWriter w(parent.out(), parent.indent());
  w.string("device", c.device);
  if (c.nvme_path.empty()) w.null("nvme_path");
  else w.string("nvme_path", c.nvme_path);
  w.integer("buffer_count", c.buffer_count);
  w.flag("pin_memory", c.pin_memory);
  w.flag("pipeline_read", c.pipeline_read);
  w.flag("pipeline_write", c.pipeline_write);
  w.flag("fast_init", c.fast_init);
  w.real("ratio", c.ratio);
}

void write_zero(ObjectWriter& parent, const ZeroConfig& c) {
  parent.key("zero_optimization");
  ObjectWriter w(parent.out(), parent.indent());
  w.integer("stage", c.stage);
  w.flag("contiguous_gradients", c.contiguous_gradients);
  w.flag("overlap_comm", c.overlap_comm);
  w.flag("reduce_scatter", c.reduce_scatter);
  w.integer("reduce_bucket_size", c.reduce_bucket_size);
  w.flag("use_multi_rank_bucket_allreduce", c.use_multi_rank_bucket_allreduce);
  w.flag("allgather_partitions", c.allgather_partitions);
  w.integer("allgather_bucket_size", c.allgather_bucket_size);
  w.flag("load_from_fp32_weights", c.load_from_fp32_weights);
  w.flag("elastic_checkpoint", c.elastic_checkpoint);
  write_offload_param(w, c.offload_param);
  write_offload_optimizer(w, c.offload_optimizer);
  w.integer("sub_group_size", c.sub_group_size);
  w.integer("stage3_prefetch_bucket_size", c.prefetch_bucket_size);
  w.integer("stage3_param_persistence_threshold", c.param_persistence_threshold);
  w.integer("stage3_model_persistence_threshold", c.model_persistence_threshold);
  w.integer("stage3_max_live_parameters", c.max_live_parameters);
  w.integer("stage3_max_reuse_distance", c.max_reuse_distance);
  w.flag("stage3_gather_16bit_weights_on_model_save", c.gather_16bit_weights_on_model_save);
  w.integer("stage3_module_granularity_threshold", c.module_granularity_threshold);
  w.flag("stage3_use_all_reduce_for_fetch_params", c.use_all_reduce_for_fetch_params);
  w.flag("ignore_unused_parameters", c.ignore_unused_parameters);
  w.flag("legacy_stage1", c.legacy_stage1);
  w.flag("round_robin_gradients", c.round_robin_gradients);
  w.integer("zero_hpz_partition_size", c.zero_hpz_partition_size);
  w.flag("zero_quantized_weights", c.zero_quantized_weights);
  w.flag("zero_quantized_nontrainable_weights", c.zero_quantized_nontrainable_weights);
  w.flag("zero_quantized_gradients", c.zero_quantized_gradients);
  w.integer("mics_shard_size", c.mics_shard_size);
  w.flag("mics_hierarchical_params_gather", c.mics_hierarchical_params_gather);
  w.flag("memory_efficient_linear", c.memory_efficient_linear);
  w.flag("pipeline_loading_checkpoint", c.pipeline_loading_checkpoint);
  w.flag("override_module_apply", c.override_module_apply);
}

}  // namespace

std::string Config::to_json() const {
  std::string out;
  {
    ObjectWriter w(out, 0);
    // Unresolved sizes that were not given are left out (0 is not a valid size).
    if (batch.train_batch_size) w.integer("train_batch_size", batch.train_batch_size);
    if (batch.train_micro_batch_size_per_gpu)
      w.integer("train_micro_batch_size_per_gpu", batch.train_micro_batch_size_per_gpu);
    if (batch.gradient_accumulation_steps) w.integer("gradient_accumulation_steps", batch.gradient_accumulation_steps);
    if (!optimizer.type.empty()) {
      w.key("optimizer");
      ObjectWriter o(w.out(), w.indent());
      o.string("type", optimizer.type);
      o.key("params");
      ObjectWriter p(o.out(), o.indent());
      for (const auto& [name, value] : optimizer.params) p.raw(name, optimizer_value(value));
    }
    if (!scheduler.type.empty()) {
      w.key("scheduler");
      ObjectWriter s(w.out(), w.indent());
      s.string("type", scheduler.type);
      s.key("params");
      ObjectWriter p(s.out(), s.indent());
      for (const auto& [name, value] : scheduler.params) p.raw(name, schedule_value(value));
    }
    w.real("gradient_clipping", gradient_clipping);
    w.integer("steps_per_print", steps_per_print);
    w.flag("wall_clock_breakdown", wall_clock_breakdown);
    if (seed) w.raw("seed", std::to_string(*seed));
    {
      w.key("fp16");
      ObjectWriter f(w.out(), w.indent());
      f.flag("enabled", fp16.enabled);
      f.flag("auto_cast", fp16.auto_cast);
      f.real("loss_scale", fp16.loss_scale);
      f.integer("initial_scale_power", fp16.initial_scale_power);
      f.integer("loss_scale_window", fp16.loss_scale_window);
      f.integer("hysteresis", fp16.hysteresis);
      f.flag("consecutive_hysteresis", fp16.consecutive_hysteresis);
      f.real("min_loss_scale", fp16.min_loss_scale);
      f.flag("fp16_master_weights_and_grads", fp16.fp16_master_weights_and_grads);
    }
    {
      w.key("bf16");
      ObjectWriter b(w.out(), w.indent());
      b.flag("enabled", bf16.enabled);
      b.flag("immediate_grad_update", bf16.immediate_grad_update);
    }
    write_zero(w, zero);
  }
  return out + "\n";
}

}  // namespace fathom
