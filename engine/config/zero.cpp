// The "zero_optimization" section: every key of DeepSpeed v0.16's DeepSpeedZeroConfig, with its
// defaults and bounds (deepspeed/runtime/zero/config.py, offload_config.py).
#include "core/json_writer.h"
#include "engine/config/parse.h"

namespace fathom {
namespace {

// DeepSpeed reads a stage-3 key ("stage3_<field>") by its field name too: that name, "" for other keys.
std::string field_name(const std::string& key) { return key.rfind("stage3_", 0) == 0 ? key.substr(7) : ""; }

OffloadParamConfig parse_offload_param(const ConfigSection& s) {
  const OffloadParamConfig c = read_section(s, kOffloadParamFields);
  if (c.device == "nvme" && c.nvme_path.empty())
    s.fail("device", "\"nvme\" needs \"nvme_path\" (a directory on a fast local disk)");
  return c;
}

OffloadOptimizerConfig parse_offload_optimizer(const ConfigSection& s) {
  const OffloadOptimizerConfig c = read_section(s, kOffloadOptimizerFields);
  if (c.device == "nvme" && c.nvme_path.empty())
    s.fail("device", "\"nvme\" needs \"nvme_path\" (a directory on a fast local disk)");
  return c;
}

// DeepSpeed's deprecated spellings, read as the current key (as DeepSpeed reads them), each with
// a notice. `section`: the current key's section, which must not be given as well.
void map_deprecated_offload(const ConfigSection& s, const std::string& key, const std::string& section,
                            std::string& device, std::vector<std::string>& notices) {
  if (!s.boolean(key, false)) return;
  if (s.find(section))
    s.fail(key, "is DeepSpeed's deprecated spelling of \"" + section + "\": {\"device\": \"cpu\"}, which is given "
                "too (line " + std::to_string(s.line_of(section)) + "); keep \"" + section + "\"");
  device = "cpu";
  notices.push_back(config_notice(s, key, "DeepSpeed's deprecated spelling, read as \"" + section +
                                              "\": {\"device\": \"cpu\"}"));
}

// ZeRO++ and MiCS: DeepSpeed features outside Fathom's ZeRO. (Fathom's ZeRO will read the
// bucket sizes and thresholds above; they tune speed and memory, never the result.)
void reject_feature(const ConfigSection& s, const std::string& key, bool on, const std::string& feature,
                    const std::string& off) {
  if (on)
    s.fail(key, describe_config_value(*s.find(key)) + " is not supported (Fathom does not implement DeepSpeed's " +
                    feature + "); use " + off);
}

}  // namespace

const std::vector<Field<OffloadParamConfig>> kOffloadParamFields = {
    {"device", &OffloadParamConfig::device, {"none", "cpu", "nvme"}},
    {"nvme_path", &OffloadParamConfig::nvme_path, {}, kNullIfEmpty},
    {"buffer_count", &OffloadParamConfig::buffer_count, {0}},
    {"buffer_size", &OffloadParamConfig::buffer_size, {0}},
    {"max_in_cpu", &OffloadParamConfig::max_in_cpu, {0}},
    {"pin_memory", &OffloadParamConfig::pin_memory}};

const std::vector<Field<OffloadOptimizerConfig>> kOffloadOptimizerFields = {
    {"device", &OffloadOptimizerConfig::device, {"none", "cpu", "nvme"}},
    {"nvme_path", &OffloadOptimizerConfig::nvme_path, {}, kNullIfEmpty},
    {"buffer_count", &OffloadOptimizerConfig::buffer_count, {0}},
    {"pin_memory", &OffloadOptimizerConfig::pin_memory},
    {"pipeline_read", &OffloadOptimizerConfig::pipeline_read},
    {"pipeline_write", &OffloadOptimizerConfig::pipeline_write},
    {"fast_init", &OffloadOptimizerConfig::fast_init},
    {"ratio", &OffloadOptimizerConfig::ratio, {0.0, 1.0}}};

// The stage-3 keys under their "stage3_" names, which to_json writes; parse_zero also reads each
// by its field name, as DeepSpeed does.
const std::vector<Field<ZeroConfig>> kZeroFields = {
    {"stage", &ZeroConfig::stage, {0, 3}},
    {"contiguous_gradients", &ZeroConfig::contiguous_gradients},
    {"overlap_comm", &ZeroConfig::overlap_comm},
    {"reduce_scatter", &ZeroConfig::reduce_scatter},
    {"reduce_bucket_size", &ZeroConfig::reduce_bucket_size, {0}},
    {"use_multi_rank_bucket_allreduce", &ZeroConfig::use_multi_rank_bucket_allreduce},
    {"allgather_partitions", &ZeroConfig::allgather_partitions},
    {"allgather_bucket_size", &ZeroConfig::allgather_bucket_size, {0}},
    {"load_from_fp32_weights", &ZeroConfig::load_from_fp32_weights},
    {"elastic_checkpoint", &ZeroConfig::elastic_checkpoint},
    {"offload_param", write_object<&ZeroConfig::offload_param, kOffloadParamFields>},
    {"offload_optimizer", write_object<&ZeroConfig::offload_optimizer, kOffloadOptimizerFields>},
    {"sub_group_size", &ZeroConfig::sub_group_size, {0}},
    {"cpu_offload_param"},  // DeepSpeed's deprecated spellings, mapped to the offload sections
    {"cpu_offload_use_pin_memory"},
    {"cpu_offload"},
    {"stage3_prefetch_bucket_size", &ZeroConfig::prefetch_bucket_size, {0}},
    {"stage3_param_persistence_threshold", &ZeroConfig::param_persistence_threshold, {0}},
    {"stage3_model_persistence_threshold", &ZeroConfig::model_persistence_threshold, {0}},
    {"stage3_max_live_parameters", &ZeroConfig::max_live_parameters, {0}},
    {"stage3_max_reuse_distance", &ZeroConfig::max_reuse_distance, {0}},
    {"stage3_gather_16bit_weights_on_model_save", &ZeroConfig::gather_16bit_weights_on_model_save},
    {"stage3_gather_fp16_weights_on_model_save"},  // the deprecated spelling of the one above
    {"stage3_module_granularity_threshold", &ZeroConfig::module_granularity_threshold},
    {"stage3_use_all_reduce_for_fetch_params", &ZeroConfig::use_all_reduce_for_fetch_params},
    {"ignore_unused_parameters", &ZeroConfig::ignore_unused_parameters},
    {"legacy_stage1", &ZeroConfig::legacy_stage1},
    {"round_robin_gradients", &ZeroConfig::round_robin_gradients},
    {"zero_hpz_partition_size", &ZeroConfig::zero_hpz_partition_size, {0}},
    {"zero_quantized_weights", &ZeroConfig::zero_quantized_weights},
    {"zero_quantized_nontrainable_weights", &ZeroConfig::zero_quantized_nontrainable_weights},
    {"zero_quantized_gradients", &ZeroConfig::zero_quantized_gradients},
    {"mics_shard_size", &ZeroConfig::mics_shard_size},
    {"mics_hierarchical_params_gather", &ZeroConfig::mics_hierarchical_params_gather},
    {"memory_efficient_linear", &ZeroConfig::memory_efficient_linear},
    {"pipeline_loading_checkpoint", &ZeroConfig::pipeline_loading_checkpoint},
    {"override_module_apply", &ZeroConfig::override_module_apply}};

const std::vector<Field<AioConfig>> kAioFields = {
    {"block_size", &AioConfig::block_size, {512}},
    {"queue_depth", &AioConfig::queue_depth, {1}},
    {"intra_op_parallelism", &AioConfig::intra_op_parallelism, {1}},
    {"thread_count"},  // DeepSpeed's older name of intra_op_parallelism
    {"single_submit", &AioConfig::single_submit},
    {"overlap_events", &AioConfig::overlap_events},
    {"use_gds", &AioConfig::use_gds}};

std::string config_notice(const ConfigSection& s, const std::string& key, const std::string& what) {
  const int line = s.line_of(key);
  return "config notice at " + s.path_of(key) + (line > 0 ? " (line " + std::to_string(line) + ")" : "") + ": " + what;
}

AioConfig parse_aio(const ConfigSection& s, std::vector<std::string>& notices) {
  // DeepSpeed's older name, thread_count, is read in intra_op_parallelism's place.
  const AioConfig c = read_section(s, kAioFields, [&](const std::string& key) {
    if (key != "intra_op_parallelism" || !s.find("thread_count")) return key;
    if (s.find(key))
      s.fail("thread_count", "is DeepSpeed's older name of \"intra_op_parallelism\", which is given too (line " +
                                 std::to_string(s.line_of(key)) + "); keep \"intra_op_parallelism\"");
    return std::string("thread_count");
  });
  if (s.find("thread_count"))
    notices.push_back(config_notice(s, "thread_count", "DeepSpeed's older name, read as \"intra_op_parallelism\" (" +
                                                           std::to_string(c.intra_op_parallelism) + " I/O threads)"));
  if (c.use_gds)
    s.fail("use_gds", "true is not supported (GPUDirect Storage reads swap files straight into GPU memory; Fathom "
                      "reads them into pinned host memory): remove it or set false");
  return c;
}

ZeroConfig parse_zero(const ConfigSection& s, std::vector<std::string>& notices) {
  const std::string gather = "stage3_gather_16bit_weights_on_model_save";
  const std::string fp16_gather = "stage3_gather_fp16_weights_on_model_save";  // its deprecated spelling
  std::vector<std::string> known = field_keys(kZeroFields);
  for (const Field<ZeroConfig>& field : kZeroFields)
    if (field.read && !field_name(field.key).empty()) known.push_back(field_name(field.key));
  s.check_keys(known);

  ZeroConfig c;
  // The table reads each stage-3 key by the name given, and the 16-bit gather flag by its
  // deprecated spelling when that is given alone.
  read_fields(s, kZeroFields, c, [&](const std::string& key) {
    const std::string field = field_name(key);
    if (field.empty()) return key;
    if (s.find(field) && s.find(key))
      s.fail(field, "also given as \"" + key + "\" (line " + std::to_string(s.line_of(key)) +
                        "); DeepSpeed reads both names as one setting, keep one");
    const std::string given = s.find(key) ? key : field;
    return key == gather && !s.find(given) && s.find(fp16_gather) ? fp16_gather : given;
  });
  // DeepSpeed overlaps by default at stage 3 only. At stage 0 Fathom's data-parallel all-reduce
  // overlaps backward by default too (DeepSpeed reduces after backward there).
  if (!s.find("overlap_comm")) c.overlap_comm = c.stage == 0 || c.stage == 3;
  c.offload_param = parse_offload_param(s.section("offload_param"));
  c.offload_optimizer = parse_offload_optimizer(s.section("offload_optimizer"));
  map_deprecated_offload(s, "cpu_offload", "offload_optimizer", c.offload_optimizer.device, notices);
  map_deprecated_offload(s, "cpu_offload_param", "offload_param", c.offload_param.device, notices);
  // DeepSpeed ignores parameter offload below stage 3; Fathom says so rather than train without it.
  if (c.offload_param.device != "none" && c.stage != 3) {
    const std::string what = "\"" + c.offload_param.device + "\" offloads ZeRO stage 3's parameter shards, but "
                             "zero_optimization.stage is " + std::to_string(c.stage) + " (DeepSpeed ignores it below "
                             "stage 3); set \"stage\": 3 or remove it";
    if (s.find("offload_param")) s.section("offload_param").fail("device", what);
    s.fail("cpu_offload_param", "(read as offload_param.device) " + what);
  }
  // Optimizer offload moves ZeRO's optimizer shard: there is none at stage 0.
  if (c.offload_optimizer.device != "none" && c.stage == 0) {
    const std::string what = "\"" + c.offload_optimizer.device + "\" offloads ZeRO's optimizer shard, but "
                             "zero_optimization.stage is 0; use stage 1, 2 or 3";
    if (s.find("offload_optimizer")) s.section("offload_optimizer").fail("device", what);
    s.fail("cpu_offload", "(read as offload_optimizer.device) " + what);
  }
  if (c.offload_optimizer.ratio != 1.0 && c.stage != 3)
    s.section("offload_optimizer").fail("ratio", json_number(c.offload_optimizer.ratio) + " (a partial offload) needs "
                                        "zero_optimization.stage 3, as in DeepSpeed; stage is " +
                                        std::to_string(c.stage) + ", use ratio 1.0");
  // DeepSpeed maps this one to nothing; Fathom pins the buffers of both offloads, as meant.
  if (s.boolean("cpu_offload_use_pin_memory", false)) {
    c.offload_optimizer.pin_memory = c.offload_param.pin_memory = true;
    notices.push_back(config_notice(s, "cpu_offload_use_pin_memory", "DeepSpeed's deprecated spelling (which DeepSpeed "
                                    "ignores), read as \"pin_memory\": true in offload_optimizer and offload_param"));
  }
  if (s.find(fp16_gather)) {
    if (s.find(gather) || s.find(field_name(gather)))
      s.fail(fp16_gather,
             "is DeepSpeed's deprecated spelling of \"" + gather + "\", which is given too; keep that one");
    notices.push_back(config_notice(s, fp16_gather, "DeepSpeed's deprecated spelling, read as \"" + gather + "\""));
  }

  reject_feature(s, "zero_quantized_weights", c.zero_quantized_weights, "ZeRO++ quantized weights", "false");
  reject_feature(s, "zero_quantized_nontrainable_weights", c.zero_quantized_nontrainable_weights,
                 "ZeRO++ quantized weights", "false");
  reject_feature(s, "zero_quantized_gradients", c.zero_quantized_gradients, "ZeRO++ quantized gradients", "false");
  reject_feature(s, "zero_hpz_partition_size", c.zero_hpz_partition_size > 1, "ZeRO++ hierarchical partitioning", "1");
  reject_feature(s, "mics_shard_size", c.mics_shard_size > 0, "MiCS", "-1");
  reject_feature(s, "mics_hierarchical_params_gather", c.mics_hierarchical_params_gather, "MiCS", "false");
  reject_feature(s, "legacy_stage1", c.legacy_stage1, "legacy ZeRO stage 1", "false");
  return c;
}

}  // namespace fathom
