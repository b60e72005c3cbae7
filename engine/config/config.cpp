#include "engine/config/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/did_you_mean.h"
#include "engine/config/parse.h"
#include "engine/config/schema.h"

namespace fathom {

const std::vector<Field<ActivationCheckpointingConfig>> kActivationCheckpointingFields = {
    {"partition_activations", &ActivationCheckpointingConfig::partition_activations},
    {"number_checkpoints",
     [](auto& w, auto key, auto& c) { if (c.number_checkpoints) w.member(key, *c.number_checkpoints); }},
    {"contiguous_memory_optimization"},  // this and the last two: refused when true
    {"synchronize_checkpoint_boundary", &ActivationCheckpointingConfig::synchronize_checkpoint_boundary},
    {"profile"},
    {"cpu_checkpointing"}};

const std::vector<Field<PipelineConfig>> kPipelineFields = {
    {"stages", [](auto& w, auto key, auto& c) { if (c.stages > 0) w.member(key, c.stages); }},
    {"partition", &PipelineConfig::partition},
    {"seed_layers"},  // refused when true
    {"schedule", &PipelineConfig::schedule, {"gpipe", "1f1b", "interleaved", "zero_bubble"}},
    {"virtual_stages", &PipelineConfig::virtual_stages, {1}},
    {"activation_checkpoint_interval", &PipelineConfig::activation_checkpoint_interval, {0}},
    {"pipe_partitioned", &PipelineConfig::pipe_partitioned},
    {"grad_partitioned", &PipelineConfig::grad_partitioned}};

const std::vector<Field<HybridEngineConfig>> kHybridEngineFields = {
    {"enabled", &HybridEngineConfig::enabled},
    {"max_out_tokens", &HybridEngineConfig::max_out_tokens, {1}},
    {"inference_tp_size", &HybridEngineConfig::inference_tp_size, {1}},
    {"release_inference_cache", &HybridEngineConfig::release_inference_cache},
    {"pin_parameters", &HybridEngineConfig::pin_parameters},
    {"tp_gather_partition_size", &HybridEngineConfig::tp_gather_partition_size, {1}}};

namespace {

ActivationCheckpointingConfig parse_activation_checkpointing(const ConfigSection& s) {
  ActivationCheckpointingConfig c = read_section(s, kActivationCheckpointingFields);
  c.present = s.present();
  c.number_checkpoints = s.optional_integer("number_checkpoints", 1);
  const std::pair<const char*, const char*> refused[] = {
      {"contiguous_memory_optimization", "Fathom's caching allocator reuses the checkpoints' blocks; there is no "
                                         "contiguous checkpoint buffer"},
      {"profile", "time checkpointed blocks with the flops profiler or the trace instead"},
      {"cpu_checkpointing", "checkpointed activations stay on the model's device (Fathom offloads optimizer state, not activations)"}};
  for (const auto& [key, why] : refused)
    if (s.boolean(key, false)) s.fail(key, std::string("true is not supported: ") + why + "; remove it or set false");
  return c;
}

PipelineConfig parse_pipeline(const ConfigSection& s) {
  PipelineConfig c = read_section(s, kPipelineFields);
  if (const ConfigNode* stages = s.find("stages"); stages && !(stages->is_scalar() && stages->text == "auto"))
    c.stages = s.integer("stages", 0, 1);
  if (c.partition == "best") {
    c.partition = "parameters";
  } else if (c.partition != "parameters" && c.partition != "uniform" && c.partition.rfind("type:", 0) != 0) {
    s.fail("partition", "\"" + c.partition + "\" is not a partition method; use \"parameters\" (\"best\" means "
                        "it), \"uniform\" or \"type:REGEX\"");
  }
  if (c.virtual_stages > 1 && c.schedule != "interleaved")
    s.fail("virtual_stages", std::to_string(c.virtual_stages) + " model chunks per stage need \"schedule\": "
                             "\"interleaved\"; the " + c.schedule + " schedule runs one chunk per stage");
  if (s.boolean("seed_layers", false))
    s.fail("seed_layers", "true is not supported (every layer is initialised as in the one-process model, which "
                          "checkpoints and equivalence rely on): remove it or set false");
  return c;
}

HybridEngineConfig parse_hybrid_engine(const ConfigSection& s) {
  const HybridEngineConfig c = read_section(s, kHybridEngineFields);
  if (c.inference_tp_size != 1)
    s.fail("inference_tp_size", std::to_string(c.inference_tp_size) + " is not supported: generation runs in the "
                                "training layout (a tensor-parallel split for generation only is not built); set 1");
  return c;
}

}  // namespace

Config parse_config(const ConfigNode& root, const std::string& source) {
  const ConfigSection top(&root, "", source);
  std::vector<std::string> known = field_keys(kTopLevelFields);
  for (const std::string& key : deepspeed_only_config_keys()) known.push_back(key);
  // An unknown top-level key close to a known one is a typo, refused with its did-you-mean; one
  // like no key (DeepSpeedExamples' "cuda_visible_devices") is ignored with a notice, as DeepSpeed
  // ignores it. Inside a known section every unknown key is refused.
  std::vector<std::string> ignored;
  for (const ConfigMember& member : root.members)
    if (std::find(known.begin(), known.end(), member.key) == known.end() && closest_match(member.key, known).empty())
      ignored.push_back(member.key);
  std::vector<std::string> accepted = known;
  accepted.insert(accepted.end(), ignored.begin(), ignored.end());
  top.check_keys(accepted);
  check_deepspeed_only_keys(top);

  Config c;
  c.source = source;
  c.ignored_keys = ignored;
  for (const std::string& key : ignored)
    c.notices.push_back(config_notice(top, key, "unknown key, ignored as DeepSpeed ignores it (no key Fathom or "
                                                "DeepSpeed reads is close to it; fathom-config check --strict refuses it)"));
  c.batch.train_batch_size = top.integer("train_batch_size", 0, 1);
  c.batch.train_micro_batch_size_per_gpu = top.integer("train_micro_batch_size_per_gpu", 0, 1);
  c.batch.gradient_accumulation_steps = top.integer("gradient_accumulation_steps", 0, 1);
  if (c.batch.train_batch_size == 0 && c.batch.train_micro_batch_size_per_gpu == 0)
    throw_config_error({source, 0, ""},
                       "train_batch_size or train_micro_batch_size_per_gpu must be given (DeepSpeed's rule: "
                       "train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * "
                       "data-parallel world size)");

  read_fields(top, kTopLevelFields, c);  // the plain keys: gradient_clipping, steps_per_print, ...
  if (const auto seed = top.optional_integer("seed", 0)) c.seed = static_cast<uint64_t>(*seed);

  c.fp16 = parse_fp16(top.section("fp16"));
  // "bfloat16" is DeepSpeed's older name for "bf16"; it still reads both.
  if (top.find("bf16") && top.find("bfloat16"))
    top.fail("bfloat16", "\"bf16\" is given too (line " + std::to_string(top.line_of("bf16")) +
                             "); \"bfloat16\" is DeepSpeed's old name for it, keep one");
  c.bf16 = parse_bf16(top.section(top.find("bfloat16") ? "bfloat16" : "bf16"));
  if (top.find("bfloat16"))
    c.notices.push_back(config_notice(top, "bfloat16", "DeepSpeed's deprecated name, read as \"bf16\""));
  if (c.fp16.enabled && c.bf16.enabled)
    throw_config_error({source, 0, ""},
                       "fp16.enabled and bf16.enabled are both true; choose one mixed-precision mode (DeepSpeed "
                       "rejects both too)");
  c.tensorboard = parse_monitor(top.section("tensorboard"));
  c.csv_monitor = parse_monitor(top.section("csv_monitor"));
  c.flops_profiler = read_section(top.section("flops_profiler"), kFlopsProfilerFields);
  c.comms_logger = parse_comms_logger(top.section("comms_logger"));
  c.trace = parse_trace(top.section("trace"));
  // DeepSpeed's oldest ZeRO spelling, a boolean: true is stage 1, false stage 0.
  if (const ConfigNode* zero = top.find("zero_optimization"); zero && zero->is_scalar() && config_bool(*zero)) {
    c.zero.stage = *config_bool(*zero) ? 1 : 0;
    c.zero.overlap_comm = c.zero.stage == 0;  // the stage's default
    c.notices.push_back(config_notice(top, "zero_optimization", std::string("DeepSpeed's deprecated boolean form, read ") +
                                      "as {\"stage\": " + std::to_string(c.zero.stage) + "}"));
  } else {
    c.zero = parse_zero(top.section("zero_optimization"), c.notices);
  }
  c.aio = parse_aio(top.section("aio"), c.notices);
  // DeepSpeed's TPTrainingConfig: autotp_size, and the AutoTP knobs that only have a meaning for
  // its module injection, accepted at their defaults.
  const ConfigSection tensor_parallel = top.section("tensor_parallel");
  tensor_parallel.check_keys({"autotp_size", "tp_overlap_comm", "keep_module_on_host", "replace_with_kernel_inject"});
  c.tensor_parallel_size = std::max<int64_t>(1, tensor_parallel.integer("autotp_size", 0, 0));
  for (const char* key : {"tp_overlap_comm", "keep_module_on_host", "replace_with_kernel_inject"})
    if (tensor_parallel.boolean(key, false))
      tensor_parallel.fail(key, "true is not supported (it concerns DeepSpeed's AutoTP module injection; Fathom's "
                                "tensor-parallel layers are built in): remove it or set false");
  c.activation_checkpointing = parse_activation_checkpointing(top.section("activation_checkpointing"));
  c.pipeline = parse_pipeline(top.section("pipeline"));
  if (c.pipeline.stages > 1 && c.zero.stage == 3)
    top.section("zero_optimization").fail("stage", kZero3WithPipeline);
  c.hybrid_engine = parse_hybrid_engine(top.section("hybrid_engine"));
  c.checkpoint_tag_validation =
      top.section("checkpoint").choice("tag_validation", c.checkpoint_tag_validation, {"Ignore", "Warn", "Fail"});
  c.dataloader_drop_last = top.optional_boolean("dataloader_drop_last");
  const ConfigSection data_types = top.section("data_types");
  data_types.check_keys({"grad_accum_dtype"});
  c.grad_accum_dtype = data_types.choice("grad_accum_dtype", "", {"fp32", "fp16", "bf16"});
  const std::string model_dtype = c.fp16.enabled ? "fp16" : c.bf16.enabled ? "bf16" : "fp32";
  if (!c.grad_accum_dtype.empty() && c.grad_accum_dtype != "fp32" && c.grad_accum_dtype != model_dtype)
    data_types.fail("grad_accum_dtype", "\"" + c.grad_accum_dtype + "\" with a model trained in " + model_dtype +
                                            "; gradients accumulate in fp32 or in the model's own dtype (\"" +
                                            model_dtype + "\")");
  c.optimizer = parse_optimizer(top.section("optimizer"));
  const auto lr = c.optimizer.params.find("lr");
  const double* base_lr = lr == c.optimizer.params.end() ? nullptr : std::get_if<double>(&lr->second.value());
  c.scheduler = parse_scheduler(top.section("scheduler"), base_lr ? *base_lr : 1e-3);
  return c;
}

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ConfigNode read_config_file(const std::string& path) {
  // A config is a few kilobytes; this bound keeps a wrong path (a dataset, a device) from being read.
  constexpr uintmax_t kMaxConfigBytes = 16u << 20;
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw_config_error({path, 0, ""}, "is a directory, not a config file; name the JSON or YAML file in it");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_config_error({path, 0, ""}, "cannot open the file; check the path (relative paths start in the working directory)");
  const uintmax_t bytes = std::filesystem::file_size(path, error);
  if (!error && bytes > kMaxConfigBytes)
    throw_config_error({path, 0, ""}, "the file is " + std::to_string(bytes >> 20) +
                                          " MiB; a config is a few kilobytes of JSON or YAML: is this the right file?");
  std::ostringstream text;
  text << in.rdbuf();
  ConfigFormat format = ConfigFormat::Auto;
  if (ends_with(path, ".json")) format = ConfigFormat::Json;
  if (ends_with(path, ".yaml") || ends_with(path, ".yml")) format = ConfigFormat::Yaml;
  return read_config_tree(text.str(), format, path);
}

Config Config::from_file(const std::string& path) { return parse_config(read_config_file(path), path); }

Config Config::from_string(const std::string& text, ConfigFormat format) {
  return parse_config(read_config_tree(text, format, ""), "");
}

Config Config::from_string(const std::string& text) { return from_string(text, ConfigFormat::Auto); }

void Config::resolve_batch(int64_t dp_world_size) { batch = fathom::resolve_batch(batch, dp_world_size, source); }

}  // namespace fathom
