// Config::to_json: the config as used, in DeepSpeed's key names, so a run's output directory
// records exactly what ran (every default filled in) and can be fed back as a config. It writes
// the top level's table of keys (kTopLevelFields, here), whose sections write their own tables.
#include <variant>

#include "core/json_writer.h"
#include "engine/config/parse.h"

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

// An "optimizer" or "scheduler" section: its type and params.
template <typename Section>
void write_section(JsonWriter& w, const Section& section, JsonWriter::Layout layout = JsonWriter::Layout::Pretty) {
  w.begin_object(layout).member("type", section.type);
  w.key("params").begin_object();
  for (const auto& [name, value] : section.params) write_value(w.key(name), value);
  w.end_object().end_object();
}

// A batch size, left out while it is neither given nor resolved (0 is not a valid size).
template <int64_t BatchConfig::*size>
void write_batch_size(JsonWriter& w, const char* key, const Config& c) {
  if (c.batch.*size) w.member(key, c.batch.*size);
}

// The "optimizer" or "scheduler" section, left out when the config has none.
template <auto section>
void write_if_typed(JsonWriter& w, const char* key, const Config& c) {
  if (!(c.*section).type.empty()) write_section(w.key(key), c.*section);
}

constexpr JsonWriter::Layout kInline = JsonWriter::Layout::Inline;

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

// Every top-level key Fathom reads, in DeepSpeed's order; parse_config reads those that are
// code's (the sections, the batch sizes, ...).
const std::vector<Field<Config>> kTopLevelFields = {
    {"train_batch_size", write_batch_size<&BatchConfig::train_batch_size>},
    {"train_micro_batch_size_per_gpu", write_batch_size<&BatchConfig::train_micro_batch_size_per_gpu>},
    {"gradient_accumulation_steps", write_batch_size<&BatchConfig::gradient_accumulation_steps>},
    {"optimizer", write_if_typed<&Config::optimizer>},
    {"scheduler", write_if_typed<&Config::scheduler>},
    {"gradient_clipping", &Config::gradient_clipping, {0}},
    {"steps_per_print", &Config::steps_per_print, {1}},
    {"wall_clock_breakdown", &Config::wall_clock_breakdown},
    {"memory_breakdown", &Config::memory_breakdown},
    {"seed", [](auto& w, auto key, auto& c) { if (c.seed) w.member(key, static_cast<long long>(*c.seed)); }},
    {"tensor_parallel",
     [](auto& w, auto key, auto& c) {
       w.key(key).begin_object().member("autotp_size", c.tensor_parallel_size).end_object();
     }},
    {"sequence_parallel", &Config::sequence_parallel},
    {"activation_checkpointing",
     [](auto& w, auto key, auto& c) {
       if (c.activation_checkpointing.present)
         write_object<&Config::activation_checkpointing, kActivationCheckpointingFields>(w, key, c);
     }},
    {"pipeline", write_object<&Config::pipeline, kPipelineFields>},
    {"checkpoint",
     [](auto& w, auto key, auto& c) {
       w.key(key).begin_object().member("tag_validation", c.checkpoint_tag_validation).end_object();
     }},
    {"prescale_gradients", &Config::prescale_gradients},
    {"dataloader_drop_last", [](auto& w, auto key, auto& c) { w.member(key, c.dataloader_drop_last.value_or(true)); }},
    {"data_types",
     [](auto& w, auto key, auto& c) {
       w.key(key).begin_object().key("grad_accum_dtype");
       if (c.grad_accum_dtype.empty()) w.null();
       else w.value(c.grad_accum_dtype);
       w.end_object();
     }},
    {"gradient_predivide_factor", &Config::gradient_predivide_factor, {1e-30}},
    {"communication_data_type", &Config::communication_data_type, {"fp32", "fp16", "bf16"}, kNullIfEmpty},
    {"fp16", write_object<&Config::fp16, kFp16Fields>},
    {"bf16", write_object<&Config::bf16, kBf16Fields>},
    {"bfloat16"},  // DeepSpeed's older name of bf16
    {"tensorboard", write_object<&Config::tensorboard, kMonitorFields, kInline>},
    {"csv_monitor", write_object<&Config::csv_monitor, kMonitorFields, kInline>},
    {"flops_profiler", write_object<&Config::flops_profiler, kFlopsProfilerFields, kInline>},
    {"comms_logger", write_object<&Config::comms_logger, kCommsLoggerFields, kInline>},
    {"trace", write_object<&Config::trace, kTraceFields, kInline>},
    {"zero_optimization", write_object<&Config::zero, kZeroFields>},
    {"aio", write_object<&Config::aio, kAioFields, kInline>},
    {"hybrid_engine"}};  // not written back

std::string Config::to_json() const {
  JsonWriter w;
  w.begin_object();
  write_fields(w, kTopLevelFields, *this);
  w.end_object();
  return w.str() + "\n";
}

}  // namespace fathom
