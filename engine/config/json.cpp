// Config::to_json: the config as used, in DeepSpeed's key names, so a run's output directory
// records exactly what ran (every default filled in) and can be fed back as a config.
#include <variant>

#include "core/json_writer.h"
#include "engine/config/config.h"

namespace fathom {
namespace {

void write_value(JsonWriter& w, const nn::OptimizerValue& value) {
  if (const bool* flag = std::get_if<bool>(&value.value())) w.value(*flag);
  else if (const double* real = std::get_if<double>(&value.value())) w.value(*real);
  else if (const std::string* text = std::get_if<std::string>(&value.value())) w.value(*text);
  else {
    w.begin_array(JsonWriter::Layout::Inline);
    for (double item : std::get<std::vector<double>>(value.value())) w.value(item);
    w.end_array();
  }
}

void write_value(JsonWriter& w, const nn::LRParamValue& value) {
  std::visit([&](const auto& v) { w.value(v); }, value.value());
}

// An offload section's "device" and "nvme_path" (null when unset).
// An "optimizer" or "scheduler" section: its type and params.
template <typename Section>
void write_section(JsonWriter& w, const Section& section, JsonWriter::Layout layout = JsonWriter::Layout::Pretty) {
  w.begin_object(layout).member("type", section.type);
  w.key("params").begin_object();
  for (const auto& [name, value] : section.params) write_value(w.key(name), value);
  w.end_object().end_object();
}

void write_offload_device(JsonWriter& w, const std::string& device, const std::string& nvme_path) {
  w.member("device", device);
  if (nvme_path.empty()) w.key("nvme_path").null();
  else w.member("nvme_path", nvme_path);
}

void write_offload_param(JsonWriter& w, const OffloadParamConfig& c) {
  w.key("offload_param").begin_object();
  write_offload_device(w, c.device, c.nvme_path);
  w.member("buffer_count", c.buffer_count);
  w.member("buffer_size", c.buffer_size);
  w.member("max_in_cpu", c.max_in_cpu);
  w.member("pin_memory", c.pin_memory);
  w.end_object();
}

void write_offload_optimizer(JsonWriter& w, const OffloadOptimizerConfig& c) {
  w.key("offload_optimizer").begin_object();
  write_offload_device(w, c.device, c.nvme_path);
  w.member("buffer_count", c.buffer_count);
  w.member("pin_memory", c.pin_memory);
  w.member("pipeline_read", c.pipeline_read);
  w.member("pipeline_write", c.pipeline_write);
  w.member("fast_init", c.fast_init);
  w.member("ratio", c.ratio);
  w.end_object();
}

void write_zero(JsonWriter& w, const ZeroConfig& c) {
  w.key("zero_optimization").begin_object();
  w.member("stage", c.stage);
  w.member("contiguous_gradients", c.contiguous_gradients);
  w.member("overlap_comm", c.overlap_comm);
  w.member("reduce_scatter", c.reduce_scatter);
  w.member("reduce_bucket_size", c.reduce_bucket_size);
  w.member("use_multi_rank_bucket_allreduce", c.use_multi_rank_bucket_allreduce);
  w.member("allgather_partitions", c.allgather_partitions);
  w.member("allgather_bucket_size", c.allgather_bucket_size);
  w.member("load_from_fp32_weights", c.load_from_fp32_weights);
  w.member("elastic_checkpoint", c.elastic_checkpoint);
  write_offload_param(w, c.offload_param);
  write_offload_optimizer(w, c.offload_optimizer);
  w.member("sub_group_size", c.sub_group_size);
  w.member("stage3_prefetch_bucket_size", c.prefetch_bucket_size);
  w.member("stage3_param_persistence_threshold", c.param_persistence_threshold);
  w.member("stage3_model_persistence_threshold", c.model_persistence_threshold);
  w.member("stage3_max_live_parameters", c.max_live_parameters);
  w.member("stage3_max_reuse_distance", c.max_reuse_distance);
  w.member("stage3_gather_16bit_weights_on_model_save", c.gather_16bit_weights_on_model_save);
  w.member("stage3_module_granularity_threshold", c.module_granularity_threshold);
  w.member("stage3_use_all_reduce_for_fetch_params", c.use_all_reduce_for_fetch_params);
  w.member("ignore_unused_parameters", c.ignore_unused_parameters);
  w.member("legacy_stage1", c.legacy_stage1);
  w.member("round_robin_gradients", c.round_robin_gradients);
  w.member("zero_hpz_partition_size", c.zero_hpz_partition_size);
  w.member("zero_quantized_weights", c.zero_quantized_weights);
  w.member("zero_quantized_nontrainable_weights", c.zero_quantized_nontrainable_weights);
  w.member("zero_quantized_gradients", c.zero_quantized_gradients);
  w.member("mics_shard_size", c.mics_shard_size);
  w.member("mics_hierarchical_params_gather", c.mics_hierarchical_params_gather);
  w.member("memory_efficient_linear", c.memory_efficient_linear);
  w.member("pipeline_loading_checkpoint", c.pipeline_loading_checkpoint);
  w.member("override_module_apply", c.override_module_apply);
  w.end_object();
}

}  // namespace

std::string OptimizerConfig::to_json() const {
  JsonWriter w;
  write_section(w, *this, JsonWriter::Layout::Inline);
  return w.str();
}

std::string SchedulerConfig::to_json() const {
  JsonWriter w;
  write_section(w, *this, JsonWriter::Layout::Inline);
  return w.str();
}

std::string Config::to_json() const {
  JsonWriter w;
  w.begin_object();
  // Unresolved sizes that were not given are left out (0 is not a valid size).
  if (batch.train_batch_size) w.member("train_batch_size", batch.train_batch_size);
  if (batch.train_micro_batch_size_per_gpu)
    w.member("train_micro_batch_size_per_gpu", batch.train_micro_batch_size_per_gpu);
  if (batch.gradient_accumulation_steps) w.member("gradient_accumulation_steps", batch.gradient_accumulation_steps);
  if (!optimizer.type.empty()) write_section(w.key("optimizer"), optimizer);
  if (!scheduler.type.empty()) write_section(w.key("scheduler"), scheduler);
  w.member("gradient_clipping", gradient_clipping);
  w.member("steps_per_print", steps_per_print);
  w.member("wall_clock_breakdown", wall_clock_breakdown);
  w.member("memory_breakdown", memory_breakdown);
  if (seed) w.member("seed", static_cast<long long>(*seed));
  w.key("tensor_parallel").begin_object().member("autotp_size", tensor_parallel_size).end_object();
  w.member("sequence_parallel", sequence_parallel);
  if (activation_checkpointing.present) {
    w.key("activation_checkpointing").begin_object();
    w.member("partition_activations", activation_checkpointing.partition_activations);
    if (activation_checkpointing.number_checkpoints)
      w.member("number_checkpoints", *activation_checkpointing.number_checkpoints);
    w.member("synchronize_checkpoint_boundary", activation_checkpointing.synchronize_checkpoint_boundary).end_object();
  }
  w.key("pipeline").begin_object();
  if (pipeline.stages > 0) w.member("stages", pipeline.stages);
  w.member("partition", pipeline.partition).member("schedule", pipeline.schedule);
  w.member("virtual_stages", pipeline.virtual_stages);
  w.member("activation_checkpoint_interval", pipeline.activation_checkpoint_interval);
  w.member("pipe_partitioned", pipeline.pipe_partitioned).member("grad_partitioned", pipeline.grad_partitioned);
  w.end_object();
  w.key("checkpoint").begin_object().member("tag_validation", checkpoint_tag_validation).end_object();
  w.member("prescale_gradients", prescale_gradients);
  w.member("dataloader_drop_last", dataloader_drop_last.value_or(true));
  w.key("data_types").begin_object();
  if (grad_accum_dtype.empty()) w.key("grad_accum_dtype").null();
  else w.member("grad_accum_dtype", grad_accum_dtype);
  w.end_object();
  w.member("gradient_predivide_factor", gradient_predivide_factor);
  if (communication_data_type.empty()) w.key("communication_data_type").null();
  else w.member("communication_data_type", communication_data_type);
  w.key("fp16").begin_object();
  w.member("enabled", fp16.enabled);
  w.member("auto_cast", fp16.auto_cast);
  w.member("loss_scale", fp16.loss_scale);
  w.member("initial_scale_power", fp16.initial_scale_power);
  w.member("loss_scale_window", fp16.loss_scale_window);
  w.member("hysteresis", fp16.hysteresis);
  w.member("consecutive_hysteresis", fp16.consecutive_hysteresis);
  w.member("min_loss_scale", fp16.min_loss_scale);
  w.member("fp16_master_weights_and_grads", fp16.fp16_master_weights_and_grads);
  w.end_object();
  w.key("bf16").begin_object();
  w.member("enabled", bf16.enabled);
  w.member("immediate_grad_update", bf16.immediate_grad_update);
  w.end_object();
  for (const auto& [name, monitor] : {std::pair{"tensorboard", &tensorboard}, std::pair{"csv_monitor", &csv_monitor}}) {
    w.key(name).begin_object(JsonWriter::Layout::Inline);
    w.member("enabled", monitor->enabled).member("output_path", monitor->output_path).member("job_name", monitor->job_name);
    w.end_object();
  }
  w.key("flops_profiler").begin_object(JsonWriter::Layout::Inline);
  w.member("enabled", flops_profiler.enabled).member("profile_step", flops_profiler.profile_step);
  w.member("module_depth", flops_profiler.module_depth).member("top_modules", flops_profiler.top_modules);
  w.member("detailed", flops_profiler.detailed).member("output_file", flops_profiler.output_file);
  w.member("recompute_fwd_factor", flops_profiler.recompute_fwd_factor);
  w.end_object();
  w.key("comms_logger").begin_object(JsonWriter::Layout::Inline);
  w.member("enabled", comms_logger.enabled).member("verbose", comms_logger.verbose);
  w.member("prof_all", comms_logger.prof_all).member("debug", comms_logger.debug);
  w.key("prof_ops").begin_array(JsonWriter::Layout::Inline);
  for (const std::string& op : comms_logger.prof_ops) w.value(op);
  w.end_array();
  w.end_object();
  w.key("trace").begin_object(JsonWriter::Layout::Inline);
  w.member("enabled", trace.enabled).member("output_path", trace.output_path);
  w.key("steps").begin_array(JsonWriter::Layout::Inline).value(trace.first_step).value(trace.last_step).end_array();
  w.end_object();
  write_zero(w, zero);
  w.key("aio").begin_object(JsonWriter::Layout::Inline);
  w.member("block_size", aio.block_size).member("queue_depth", aio.queue_depth);
  w.member("intra_op_parallelism", aio.intra_op_parallelism).member("single_submit", aio.single_submit);
  w.member("overlap_events", aio.overlap_events).member("use_gds", aio.use_gds);
  w.end_object();
  w.end_object();
  return w.str() + "\n";
}

}  // namespace fathom
