// The "zero_optimization" section: every key of DeepSpeed v0.16's DeepSpeedZeroConfig, with its
// defaults and bounds (deepspeed/runtime/zero/config.py, offload_config.py).
#include "core/json_writer.h"
#include "engine/config/parse.h"

namespace fathom {
namespace {

// DeepSpeed accepts the stage-3 keys by field name or by their "stage3_" alias.
std::string alias_of(const std::string& field) { return "stage3_" + field; }

template <typename Read>
auto read_aliased(const ConfigSection& s, const std::string& field, Read read) {
  const std::string alias = alias_of(field);
  if (s.find(field) && s.find(alias))
    s.fail(field, "also given as \"" + alias + "\" (line " + std::to_string(s.line_of(alias)) +
                      "); DeepSpeed reads both names as one setting, keep one");
  return read(s.find(alias) ? alias : field);
}

OffloadParamConfig parse_offload_param(const ConfigSection& s) {
  s.check_keys({"device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory"});
  OffloadParamConfig c;
  c.device = s.choice("device", c.device, {"none", "cpu", "nvme"});
  c.nvme_path = s.string("nvme_path", c.nvme_path);
  c.buffer_count = s.integer("buffer_count", c.buffer_count, 0);
  c.buffer_size = s.integer("buffer_size", c.buffer_size, 0);
  c.max_in_cpu = s.integer("max_in_cpu", c.max_in_cpu, 0);
  c.pin_memory = s.boolean("pin_memory", c.pin_memory);
  if (c.device == "nvme" && c.nvme_path.empty())
    s.fail("device", "\"nvme\" needs \"nvme_path\" (a directory on a fast local disk)");
  return c;
}

OffloadOptimizerConfig parse_offload_optimizer(const ConfigSection& s) {
  s.check_keys({"device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read", "pipeline_write", "fast_init",
                "ratio"});
  OffloadOptimizerConfig c;
  c.device = s.choice("device", c.device, {"none", "cpu", "nvme"});
  c.nvme_path = s.string("nvme_path", c.nvme_path);
  c.buffer_count = s.integer("buffer_count", c.buffer_count, 0);
  c.pin_memory = s.boolean("pin_memory", c.pin_memory);
  c.pipeline_read = s.boolean("pipeline_read", c.pipeline_read);
  c.pipeline_write = s.boolean("pipeline_write", c.pipeline_write);
  c.fast_init = s.boolean("fast_init", c.fast_init);
  c.ratio = s.number("ratio", c.ratio, 0.0, 1.0);
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

std::string config_notice(const ConfigSection& s, const std::string& key, const std::string& what) {
  const int line = s.line_of(key);
  return "config notice at " + s.path_of(key) + (line > 0 ? " (line " + std::to_string(line) + ")" : "") + ": " + what;
}

AioConfig parse_aio(const ConfigSection& s, std::vector<std::string>& notices) {
  s.check_keys({"block_size", "queue_depth", "intra_op_parallelism", "thread_count", "single_submit", "overlap_events",
                "use_gds"});
  AioConfig c;
  c.block_size = s.integer("block_size", c.block_size, 512);
  c.queue_depth = s.integer("queue_depth", c.queue_depth, 1);
  if (s.find("thread_count")) {
    if (s.find("intra_op_parallelism"))
      s.fail("thread_count", "is DeepSpeed's older name of \"intra_op_parallelism\", which is given too (line " +
                                 std::to_string(s.line_of("intra_op_parallelism")) + "); keep \"intra_op_parallelism\"");
    c.intra_op_parallelism = s.integer("thread_count", c.intra_op_parallelism, 1);
    notices.push_back(config_notice(s, "thread_count", "DeepSpeed's older name, read as \"intra_op_parallelism\" (" +
                                                           std::to_string(c.intra_op_parallelism) + " I/O threads)"));
  } else {
    c.intra_op_parallelism = s.integer("intra_op_parallelism", c.intra_op_parallelism, 1);
  }
  c.single_submit = s.boolean("single_submit", c.single_submit);
  c.overlap_events = s.boolean("overlap_events", c.overlap_events);
  c.use_gds = s.boolean("use_gds", c.use_gds);
  if (c.use_gds)
    s.fail("use_gds", "true is not supported (GPUDirect Storage reads swap files straight into GPU memory; Fathom "
                      "reads them into pinned host memory): remove it or set false");
  return c;
}

ZeroConfig parse_zero(const ConfigSection& s, std::vector<std::string>& notices) {
  std::vector<std::string> known = {
      "stage", "contiguous_gradients", "overlap_comm", "reduce_scatter", "reduce_bucket_size",
      "use_multi_rank_bucket_allreduce", "allgather_partitions", "allgather_bucket_size", "load_from_fp32_weights",
      "elastic_checkpoint", "offload_param", "offload_optimizer", "sub_group_size", "cpu_offload_param",
      "cpu_offload_use_pin_memory", "cpu_offload", "ignore_unused_parameters", "legacy_stage1",
      "round_robin_gradients", "zero_hpz_partition_size", "zero_quantized_weights",
      "zero_quantized_nontrainable_weights", "zero_quantized_gradients", "mics_shard_size",
      "mics_hierarchical_params_gather", "memory_efficient_linear", "pipeline_loading_checkpoint",
      "override_module_apply", "stage3_gather_fp16_weights_on_model_save"};
  const std::vector<std::string> aliased = {"prefetch_bucket_size", "param_persistence_threshold",
                                            "model_persistence_threshold", "max_live_parameters", "max_reuse_distance",
                                            "gather_16bit_weights_on_model_save", "module_granularity_threshold",
                                            "use_all_reduce_for_fetch_params"};
  for (const std::string& field : aliased) {
    known.push_back(field);
    known.push_back(alias_of(field));
  }
  s.check_keys(known);

  ZeroConfig c;
  c.stage = s.integer("stage", c.stage, 0, 3);
  c.contiguous_gradients = s.boolean("contiguous_gradients", c.contiguous_gradients);
  // DeepSpeed overlaps by default at stage 3 only. At stage 0 Fathom's data-parallel all-reduce
  // overlaps backward by default too (DeepSpeed reduces after backward there).
  c.overlap_comm = s.optional_boolean("overlap_comm").value_or(c.stage == 0 || c.stage == 3);
  c.reduce_scatter = s.boolean("reduce_scatter", c.reduce_scatter);
  c.reduce_bucket_size = s.integer("reduce_bucket_size", c.reduce_bucket_size, 0);
  c.use_multi_rank_bucket_allreduce = s.boolean("use_multi_rank_bucket_allreduce", c.use_multi_rank_bucket_allreduce);
  c.allgather_partitions = s.boolean("allgather_partitions", c.allgather_partitions);
  c.allgather_bucket_size = s.integer("allgather_bucket_size", c.allgather_bucket_size, 0);
  c.load_from_fp32_weights = s.boolean("load_from_fp32_weights", c.load_from_fp32_weights);
  c.elastic_checkpoint = s.boolean("elastic_checkpoint", c.elastic_checkpoint);
  c.offload_param = parse_offload_param(s.section("offload_param"));
  c.offload_optimizer = parse_offload_optimizer(s.section("offload_optimizer"));
  c.sub_group_size = s.integer("sub_group_size", c.sub_group_size, 0);
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

  auto integer = [&](int64_t fallback, int64_t min) {
    return [&s, fallback, min](const std::string& key) { return s.integer(key, fallback, min); };
  };
  auto flag = [&](bool fallback) { return [&s, fallback](const std::string& key) { return s.boolean(key, fallback); }; };
  c.prefetch_bucket_size = read_aliased(s, "prefetch_bucket_size", integer(c.prefetch_bucket_size, 0));
  c.param_persistence_threshold = read_aliased(s, "param_persistence_threshold", integer(c.param_persistence_threshold, 0));
  c.model_persistence_threshold = read_aliased(s, "model_persistence_threshold", integer(c.model_persistence_threshold, 0));
  c.max_live_parameters = read_aliased(s, "max_live_parameters", integer(c.max_live_parameters, 0));
  c.max_reuse_distance = read_aliased(s, "max_reuse_distance", integer(c.max_reuse_distance, 0));
  c.gather_16bit_weights_on_model_save =
      read_aliased(s, "gather_16bit_weights_on_model_save", flag(c.gather_16bit_weights_on_model_save));
  if (const std::string old = "stage3_gather_fp16_weights_on_model_save"; s.find(old)) {
    if (s.find("gather_16bit_weights_on_model_save") || s.find(alias_of("gather_16bit_weights_on_model_save")))
      s.fail(old, "is DeepSpeed's deprecated spelling of \"stage3_gather_16bit_weights_on_model_save\", which is "
                  "given too; keep that one");
    c.gather_16bit_weights_on_model_save = s.boolean(old, false);
    notices.push_back(config_notice(s, old, "DeepSpeed's deprecated spelling, read as "
                                            "\"stage3_gather_16bit_weights_on_model_save\""));
  }
  c.module_granularity_threshold =
      read_aliased(s, "module_granularity_threshold", integer(c.module_granularity_threshold, INT64_MIN));
  c.use_all_reduce_for_fetch_params =
      read_aliased(s, "use_all_reduce_for_fetch_params", flag(c.use_all_reduce_for_fetch_params));

  c.ignore_unused_parameters = s.boolean("ignore_unused_parameters", c.ignore_unused_parameters);
  c.legacy_stage1 = s.boolean("legacy_stage1", c.legacy_stage1);
  c.round_robin_gradients = s.boolean("round_robin_gradients", c.round_robin_gradients);
  c.zero_hpz_partition_size = s.integer("zero_hpz_partition_size", c.zero_hpz_partition_size, 0);
  c.zero_quantized_weights = s.boolean("zero_quantized_weights", c.zero_quantized_weights);
  c.zero_quantized_nontrainable_weights =
      s.boolean("zero_quantized_nontrainable_weights", c.zero_quantized_nontrainable_weights);
  c.zero_quantized_gradients = s.boolean("zero_quantized_gradients", c.zero_quantized_gradients);
  c.mics_shard_size = s.integer("mics_shard_size", c.mics_shard_size, INT64_MIN);
  c.mics_hierarchical_params_gather = s.boolean("mics_hierarchical_params_gather", c.mics_hierarchical_params_gather);
  c.memory_efficient_linear = s.boolean("memory_efficient_linear", c.memory_efficient_linear);
  c.pipeline_loading_checkpoint = s.boolean("pipeline_loading_checkpoint", c.pipeline_loading_checkpoint);
  c.override_module_apply = s.boolean("override_module_apply", c.override_module_apply);

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
