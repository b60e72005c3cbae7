#pragma once
// fathom::Config: a DeepSpeed-style training config (ds_config.json, or YAML), read into typed
// structs with DeepSpeed's key names, defaults and batch-size rule.
//
//   fathom::Config config = fathom::Config::from_file("ds_config.json");
//   config.check_supported();         // features not built yet are errors here, not ignored
//   config.resolve_batch(dp_world_size);
//
// Parsing is stricter than DeepSpeed (docs/config.md lists every key and difference): unknown
// keys, duplicate keys, wrong types, out-of-range values, "auto" and inconsistent batch sizes
// are errors whose message names the file, line, key path, the value and what is allowed.
// A DeepSpeed feature Fathom does not implement is accepted while it is off and an error once
// it is on. Parsing does not depend on what is built yet (so a config with "fp16" enabled
// parses); check_supported() is where the engine refuses what it cannot run.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/config/reader.h"
#include "nn/lr_schedule.h"
#include "nn/optimizer_factory.h"
#include "zero/zero_defaults.h"

namespace fathom {

// The three batch sizes. 0 = not given; resolve_batch fills them with DeepSpeed's rule.
struct BatchConfig {
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
  int64_t dp_world_size = 0;  // the world size they were resolved for; 0 = not resolved yet

  bool resolved() const { return dp_world_size > 0; }
};

// DeepSpeed's rule with the data-parallel world size dp:
//   train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * dp.
// All three given: checked. Two given: the third is derived (and must come out whole). Only
// train_batch_size: gas 1, micro = tbs / dp. Only the micro batch: gas 1. Neither tbs nor
// micro: error. `source` names the config in messages.
BatchConfig resolve_batch(const BatchConfig& given, int64_t dp_world_size, const std::string& source = "");

// "optimizer": {"type": "AdamW", "params": {...}}. An empty type means the section is absent
// (the program passes its own optimizer, as with deepspeed.initialize(optimizer=...)).
struct OptimizerConfig {
  std::string type;  // as written; nn::make_optimizer matches it ignoring case
  nn::OptimizerParams params;
  std::string to_json() const;  // {"type": "AdamW", "params": {...}} on one line
};

// "scheduler": {"type": "WarmupLR", "params": {...}}; empty type = no schedule.
struct SchedulerConfig {
  std::string type;  // DeepSpeed's case-sensitive names (nn::lr_scheduler_types())
  nn::LRParamMap params;
  std::string to_json() const;  // {"type": "WarmupLR", "params": {...}} on one line
};

// "fp16": dynamic loss scaling as DeepSpeed's. loss_scale 0 = dynamic.
struct Fp16Config {
  bool enabled = false;
  bool auto_cast = false;
  double loss_scale = 0;
  int64_t initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1;
  bool fp16_master_weights_and_grads = false;  // DeepSpeed-only; an error when true
};

// "tensorboard" / "csv_monitor" (docs/monitoring.md): files in output_path/job_name.
struct MonitorConfig {
  bool enabled = false;
  std::string output_path;  // "" = the working directory
  std::string job_name = "DeepSpeedJobName";
};

// "flops_profiler" (DeepSpeed's keys and defaults; docs/monitoring.md): the forward of the step
// after `profile_step` steps have completed is counted per op and per module, on the first rank.
struct FlopsProfilerConfig {
  bool enabled = false;
  int64_t profile_step = 1;
  int64_t module_depth = -1;  // the aggregated profile's deepest level; -1: all
  int64_t top_modules = 1;
  bool detailed = true;       // print the annotated module tree
  std::string output_file;    // "" = the log
  double recompute_fwd_factor = 0.0;  // forward recomputed in backward (activation checkpointing)
};

// "comms_logger" (DeepSpeed's keys and defaults): every collective's latency and bandwidth.
struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;   // a line per collective as it completes
  bool prof_all = true;   // every op; false: only those in prof_ops
  bool debug = false;     // verbose lines name the collective in full (group, sequence, dtype)
  std::vector<std::string> prof_ops;  // op names: "all_reduce", "reduce_scatter", ...
};

// "trace" (Fathom's): a Chrome trace-event timeline of steps first..last (1-based, inclusive).
struct TraceConfig {
  bool enabled = false;
  std::string output_path;  // the folder for trace.json; "" = the working directory
  int64_t first_step = 2, last_step = 3;
};

// DeepSpeed's "activation_checkpointing": how the model's checkpointed blocks behave. The section
// configures checkpointing, it does not itself turn it on in DeepSpeed (the model calls
// deepspeed.checkpointing.checkpoint); in fathom-train its presence checkpoints every block.
struct ActivationCheckpointingConfig {
  bool present = false;
  bool partition_activations = false;             // stored split over the tensor-parallel ranks
  bool synchronize_checkpoint_boundary = false;   // wait for the device at each block's end
  std::optional<int64_t> number_checkpoints;      // accepted: DeepSpeed sizes contiguous buffers by it
};

// DeepSpeed's "pipeline" section (docs/pipeline_parallel.md). DeepSpeed never reads "stages" and
// "partition" (its PipelineModule takes them in code), so real configs carry their defaults,
// "auto" and "best"; Fathom reads an integer "stages" as the pipeline degree and "partition" as
// the partition method. "schedule" and "virtual_stages" are Fathom's.
struct PipelineConfig {
  int64_t stages = 0;                          // 0: "auto" (the program's choice; fathom-train: 1)
  std::string partition = "parameters";        // "best" (DeepSpeed's default): "parameters"
  std::string schedule = "1f1b";               // "gpipe", "1f1b", "interleaved", "zero_bubble"
  int64_t virtual_stages = 1;                  // model chunks per stage (interleaved)
  int64_t activation_checkpoint_interval = 0;  // checkpoint every N layers; 0: off
  bool pipe_partitioned = true, grad_partitioned = true;  // with tensor parallelism
};

// "hybrid_engine" (DeepSpeed's names and defaults; engine/rlhf/hybrid_engine.h): the RLHF actor's
// engine generating with the weights it trains.
struct HybridEngineConfig {
  bool enabled = false;
  int64_t max_out_tokens = 512;         // prompt + generated tokens a generation may hold
  int64_t inference_tp_size = 1;        // only 1: generation runs in the training layout
  bool release_inference_cache = false; // free the key/value cache after each generation
  bool pin_parameters = true;           // ZeRO-3: gather once per generation, not per forward
  int64_t tp_gather_partition_size = 8; // with inference_tp_size > 1 only (accepted, unused)
};

struct Bf16Config {
  bool enabled = false;
  bool immediate_grad_update = false;  // DeepSpeed-only; an error when true
};

// "offload_param" / "offload_optimizer": device "none", "cpu" or "nvme".
struct OffloadParamConfig {
  std::string device = "none";
  std::string nvme_path;  // "" = not given
  int64_t buffer_count = 5;
  int64_t buffer_size = 100000000;
  int64_t max_in_cpu = 1000000000;
  bool pin_memory = false;
};

// The top-level "aio" block (DeepSpeed's AsyncIO config), read by the offload I/O engine.
struct AioConfig {
  int64_t block_size = 1048576;     // bytes per request
  int64_t queue_depth = 8;          // requests in flight per thread
  int64_t intra_op_parallelism = 1; // I/O threads (DeepSpeed's older name: thread_count)
  bool single_submit = false;       // submit requests one at a time rather than in batches
  bool overlap_events = true;       // submit new requests while earlier ones complete
  bool use_gds = false;             // GPUDirect Storage: refused (Fathom reads into host memory)
};

struct OffloadOptimizerConfig {
  std::string device = "none";
  std::string nvme_path;
  int64_t buffer_count = 4;
  bool pin_memory = false;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;
};

// Why ZeRO stage 3 and a pipeline are refused together (the config and initialize both say it).
inline constexpr const char* kZero3WithPipeline =
    "ZeRO stage 3 with a pipeline is not supported: stage 3 gathers each module's parameters around its forward "
    "and its backward in the order of the first step's trace, while a pipeline keeps several micro-batches' graphs "
    "alive and interleaves their forwards and backwards; use stage 2 (gradients and optimizer state sharded, "
    "reduce-scattered after every micro-batch)";

// "zero_optimization" with DeepSpeed's (v0.16) defaults. The stage3_* keys are stored under
// DeepSpeed's field names (prefetch_bucket_size for stage3_prefetch_bucket_size); either
// spelling is accepted, as in DeepSpeed.
struct ZeroConfig {
  int64_t stage = 0;
  bool contiguous_gradients = true;
  bool overlap_comm = true;  // DeepSpeed: true for stage 3, false otherwise; Fathom: also true at stage 0
  bool reduce_scatter = true;
  int64_t reduce_bucket_size = zero::kDefaultReduceBucketElements;
  bool use_multi_rank_bucket_allreduce = true;
  bool allgather_partitions = true;
  int64_t allgather_bucket_size = zero::kDefaultAllgatherBucketElements;
  bool load_from_fp32_weights = true;
  bool elastic_checkpoint = false;
  OffloadParamConfig offload_param;
  OffloadOptimizerConfig offload_optimizer;
  int64_t sub_group_size = 1000000000;
  int64_t prefetch_bucket_size = zero::kDefaultPrefetchElements;
  int64_t param_persistence_threshold = zero::kDefaultPersistenceThreshold;
  int64_t model_persistence_threshold = INT64_MAX;
  int64_t max_live_parameters = zero::kDefaultMaxLiveElements;
  int64_t max_reuse_distance = zero::kDefaultMaxReuseDistance;
  bool gather_16bit_weights_on_model_save = false;
  int64_t module_granularity_threshold = 0;
  bool use_all_reduce_for_fetch_params = false;
  bool ignore_unused_parameters = true;
  bool legacy_stage1 = false;
  bool round_robin_gradients = false;
  int64_t zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_nontrainable_weights = false;
  bool zero_quantized_gradients = false;
  int64_t mics_shard_size = -1;
  bool mics_hierarchical_params_gather = false;
  bool memory_efficient_linear = true;
  bool pipeline_loading_checkpoint = false;
  bool override_module_apply = true;
};

struct Config {
  // Format from the extension (.json, .yaml/.yml), else detected from the text. Messages name
  // `path` and the line.
  static Config from_file(const std::string& path);
  // Format Auto: JSON when the first non-comment character is '{', else YAML.
  static Config from_string(const std::string& text, ConfigFormat format);
  static Config from_string(const std::string& text);

  BatchConfig batch;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  double gradient_clipping = 0;  // max global gradient norm; 0 = off
  int64_t steps_per_print = 10;
  bool wall_clock_breakdown = false;
  bool memory_breakdown = false;  // the allocator's tags after forward, backward and step
  std::optional<uint64_t> seed;
  Fp16Config fp16;
  Bf16Config bf16;
  MonitorConfig tensorboard, csv_monitor;
  FlopsProfilerConfig flops_profiler;
  CommsLoggerConfig comms_logger;
  TraceConfig trace;
  ZeroConfig zero;
  ActivationCheckpointingConfig activation_checkpointing;
  PipelineConfig pipeline;
  HybridEngineConfig hybrid_engine;
  // Data-parallel gradient averaging (DeepSpeed's semantics; parallel/gradient_averaging.h):
  // divide by the data-parallel size before the reduction instead of after it; or, without
  // prescaling, divide by the factor before and by (size / factor) after.
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  // "fp32", "fp16" or "bf16": the dtype gradients are reduced in. Unset: the gradients' own
  // (fp32 at stage 0 in mixed precision, the model's dtype in ZeRO's buckets) — Fathom's
  // default; DeepSpeed's is the training precision.
  std::string communication_data_type;
  // Whether the loader skips an epoch's last, short global batch. Unset: Fathom's default,
  // true (every step a full global batch); DeepSpeed's default is false.
  std::optional<bool> dataloader_drop_last;
  // data_types.grad_accum_dtype: "fp32", "fp16" or "bf16", the dtype gradients accumulate in
  // across micro-batches. Unset: fp32 at stage 0 in mixed precision, and at ZeRO 1-3 fp32 when
  // gradient_accumulation_steps > 1, else the model's dtype. A 16-bit dtype must be the model's.
  std::string grad_accum_dtype;
  // "aio": the offload I/O engine's settings (docs/offload.md).
  AioConfig aio;
  // tensor_parallel.autotp_size (DeepSpeed's AutoTP training key; 0 and 1 are off): the tensor
  // axis of the process grid (docs/tensor_parallel.md).
  int64_t tensor_parallel_size = 1;
  // Fathom's top-level "sequence_parallel" (outside DeepSpeed's tensor_parallel section, whose
  // schema forbids unknown keys): Megatron's sequence parallelism in tensor-parallel models.
  // The program that builds the model reads it (fathom-train passes it to models::TensorParallelDecoderLayers).
  bool sequence_parallel = false;
  // checkpoint.tag_validation: "Ignore", "Warn" or "Fail" when ranks save under different tags.
  std::string checkpoint_tag_validation = "Warn";
  // One line per key read differently from how it is written (DeepSpeed's deprecated
  // spellings, mapped to the current key): fathom::initialize logs them on rank 0.
  std::vector<std::string> notices;
  // Unknown top-level keys like no known one, ignored as DeepSpeed ignores them (each has its
  // notice); `fathom-config check --strict` refuses them.
  std::vector<std::string> ignored_keys;
  std::string source;  // the file path ("" for a string), for messages

  // Fills in `batch` for this data-parallel world size (see fathom::resolve_batch).
  void resolve_batch(int64_t dp_world_size);
  // Errors for what the config enables but this build of Fathom cannot run yet, e.g.
  //   config error at zero_optimization.stage: 2 is not supported yet (ZeRO arrives with its issue); use 0
  void check_supported() const;
  // The config as used (every key Fathom reads, defaults filled in, the batch sizes resolved
  // when they are), as JSON: what fathom-train writes to its output directory.
  std::string to_json() const;
};

}  // namespace fathom
