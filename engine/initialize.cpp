#include "engine/initialize.h"

#include <cctype>
#include <cstdlib>
#include <string>

#include "core/logging.h"
#include "engine/monitor/make_monitors.h"
#include "engine/offload_setup.h"
#include "engine/pipeline_executor.h"
#include "engine/profilers.h"
#include "nn/deferred_init.h"
#include "nn/optimizer_factory.h"
#include "parallel/compressed_optimizers.h"
#include "parallel/local_communicator.h"
#include "parallel/pipeline_module.h"
#include "zero/replicated_state.h"
#include "zero/sharded_state.h"

namespace fathom {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// prescale_gradients, gradient_predivide_factor and communication_data_type.
parallel::GradientAveraging averaging_of(const Config& config) {
  parallel::GradientAveraging averaging{config.prescale_gradients, config.gradient_predivide_factor, std::nullopt};
  if (!config.communication_data_type.empty()) averaging.dtype = parse_dtype(config.communication_data_type);
  return averaging;
}

// The one owner of gradients and optimizer state for this config.
std::unique_ptr<zero::TrainingState> make_training_state(const Config& config, nn::Module& model,
                                                         const zero::ParallelLayout& layout,
                                                         const zero::OptimizerFactory& make_optimizer) {
  const auto named = model.named_parameters();
  OffloadPlacement offload = offload_placement(config, layout.groups);  // checked at every stage
  if (config.zero.stage == 0)
    return std::make_unique<zero::ReplicatedState>(
        named, layout,
        zero::ReplicatedOptions{.reduce_bucket_elements = config.zero.reduce_bucket_size,
                                .overlap_comm = config.zero.overlap_comm,
                                .averaging = averaging_of(config),
                                .accumulate_in_model_dtype = config.grad_accum_dtype == "fp16" ||
                                                             config.grad_accum_dtype == "bf16"},
        make_optimizer);
  FATHOM_CHECK(!make_optimizer || !parallel::is_compressed_optimizer(config.optimizer.type),
               "config error at zero_optimization.stage: ", config.optimizer.type, " communicates its own compressed "
               "momentum over whole gradients, so it runs without ZeRO partitioning (as in DeepSpeed); stage is ",
               config.zero.stage, ", use 0");
  FATHOM_CHECK(!make_optimizer || lower(config.optimizer.type) != "lamb",
               "config error at optimizer.type: Lamb computes a trust ratio "
               "per parameter, which a ZeRO shard (a slice of the flattened parameters) does not have; use Adam, "
               "AdamW, SGD or Lion with zero_optimization.stage ",
               config.zero.stage, ", or stage 0");
  return std::make_unique<zero::ShardedState>(
      named, layout,
      zero::ShardedOptions{.stage = static_cast<int>(config.zero.stage),
                           .reduce_bucket_elements = config.zero.reduce_bucket_size,
                           .allgather_bucket_elements = config.zero.allgather_bucket_size,
                           .overlap_comm = config.zero.overlap_comm,
                           // Offloaded at stages 2-3, the gradient shard lives in the host tier as the
                           // optimizer's fp32 gradient (bit-equal: each micro-step adds to it once).
                           .accumulate_in_fp32 = config.grad_accum_dtype.empty()
                                                     ? config.batch.gradient_accumulation_steps > 1 ||
                                                           (config.zero.stage >= 2 &&
                                                            offload.optimizer.tier != zero::OptimizerOffload::Tier::Device)
                                                     : config.grad_accum_dtype == "fp32",
                           .averaging = averaging_of(config),
                           .gather = {.persistence_threshold = config.zero.param_persistence_threshold,
                                      .prefetch_elements = config.zero.prefetch_bucket_size,
                                      .max_live_elements = config.zero.max_live_parameters,
                                      .max_reuse_distance = config.zero.max_reuse_distance},
                           .offload = std::move(offload.optimizer),
                           .parameter_offload = std::move(offload.parameters)},
      make_optimizer, &model);
}

// The pipeline axis, the config's "pipeline" section and the model agree; ZeRO-3 is refused.
void check_pipeline_layout(const Config& config, nn::Module& model, const parallel::ProcessGroups& groups) {
  const int pipeline_size = groups.pipeline().size();
  FATHOM_CHECK(config.pipeline.stages == 0 || config.pipeline.stages == pipeline_size, "initialize: the config's "
               "pipeline.stages is ", config.pipeline.stages, " but the process groups' pipeline axis has ",
               pipeline_size, " ranks; build the groups as runtime.groups(", config.pipeline.stages,
               ", tp) (fathom-train does) or set stages to ", pipeline_size);
  if (auto* stage = dynamic_cast<parallel::PipelineModule*>(&model)) {
    FATHOM_CHECK(config.pipeline.virtual_stages == stage->chunks(), "initialize: the config's pipeline.virtual_stages "
                 "is ", config.pipeline.virtual_stages, " but the PipelineModule was cut into ", stage->chunks(),
                 " chunks per stage; pass PipelineOptions{.chunks = ", config.pipeline.virtual_stages, "}");
    // The config refuses it when it names its stages; this catches "pipeline" left out.
    FATHOM_CHECK(config.zero.stage <= 2, "config error at zero_optimization.stage: ", kZero3WithPipeline);
  } else {
    FATHOM_CHECK(pipeline_size == 1, "initialize: the process groups have ", pipeline_size, " pipeline stages but the "
                 "model is a ", model.type_name(), "; wrap it in a parallel::PipelineModule (a model given as an "
                 "nn::LayerSequence) to cut it into stages");
  }
}

// What trains a PipelineModule: its stage of the config's schedule (engine/pipeline_executor.h).
std::unique_ptr<Schedule> pipeline_schedule(const Config& config, const parallel::PipelineModule& stage,
                                            int64_t micro_batches) {
  // Sequence-parallel activations differ between the tensor ranks: nothing to partition.
  const StageTransfers transfers{.partition_activations = config.pipeline.pipe_partitioned && !config.sequence_parallel,
                                 .partition_gradients = config.pipeline.grad_partitioned && !config.sequence_parallel};
  return std::make_unique<PipelineExecutor>(parallel::parse_pipe_schedule(config.pipeline.schedule), stage,
                                            static_cast<int>(micro_batches), transfers);
}

// What every engine does first: the config checked against this build and the data group's
// size, the layout read from the model, one set of weights, the model in its precision.
zero::ParallelLayout prepare(Config& config, nn::Module& model, const parallel::ProcessGroups& groups) {
  const parallel::GridCoord coord = groups.coord();
  if (coord.data == 0 && coord.tensor == 0 && coord.pipeline == 0)
    for (const std::string& notice : config.notices) FATHOM_LOG(Warning, notice);
  config.check_supported();
  for (const auto& [name, parameter] : model.named_parameters())
    FATHOM_CHECK(!nn::is_deferred(parameter) || config.zero.stage == 3, "config error at zero_optimization.stage: the "
                 "model was built shard by shard (nn::DeferredInit; \"", name, "\" has no values yet), which needs stage 3 "
                 "to keep only each rank's shard; stage is ", config.zero.stage, ": use stage 3, or build the model "
                 "without DeferredInit");
  FATHOM_CHECK(config.tensor_parallel_size == groups.tensor().size(), "initialize: the config's "
               "tensor_parallel.autotp_size is ", config.tensor_parallel_size, " but the process groups' tensor axis has ",
               groups.tensor().size(), " ranks; build the groups as runtime.groups(1, ", config.tensor_parallel_size,
               ") (fathom-train does) or set autotp_size to ", groups.tensor().size());
  check_pipeline_layout(config, model, groups);
  config.resolve_batch(groups.data().size());
  zero::ParallelLayout layout{groups, {}};
  for (const auto& [name, param] : model.named_parameters()) layout.placements.push_back(model.placement(name));
  zero::broadcast_initial_weights(model.named_parameters(), layout);
  if (config.bf16.enabled || config.fp16.enabled) model.to(config.bf16.enabled ? DType::BF16 : DType::F16);
  return layout;
}

// FATHOM_LOG_ALL_RANKS=1: every rank prints its progress line (to see a rank's own loss).
bool log_all_ranks() {
  const char* value = std::getenv("FATHOM_LOG_ALL_RANKS");
  return value != nullptr && std::string(value) == "1";
}

EngineOptions engine_options(const Config& config, int64_t dp_world_size) {
  EngineOptions options;
  options.micro_batch_size = config.batch.train_micro_batch_size_per_gpu;
  options.gradient_accumulation_steps = config.batch.gradient_accumulation_steps;
  options.dp_world_size = dp_world_size;
  options.gradient_clipping = config.gradient_clipping;
  options.steps_per_print = config.steps_per_print;
  options.wall_clock_breakdown = config.wall_clock_breakdown;
  options.memory_breakdown = config.memory_breakdown;
  options.seed = config.seed.value_or(kDefaultSeed);
  using TagValidation = EngineOptions::TagValidation;
  options.tag_validation = config.checkpoint_tag_validation == "Fail"     ? TagValidation::Fail
                           : config.checkpoint_tag_validation == "Ignore" ? TagValidation::Ignore
                                                                          : TagValidation::Warn;
  return options;
}

}  // namespace

Initialized initialize(Config config, std::shared_ptr<nn::Module> model, std::shared_ptr<nn::Optimizer> optimizer,
                       std::shared_ptr<const Dataset> training_data, const parallel::ProcessGroups& groups) {
  FATHOM_CHECK(model != nullptr, "initialize: the model is null");
  const int64_t dp_world_size = groups.data().size();
  const zero::ParallelLayout layout = prepare(config, *model, groups);
  const bool half = config.bf16.enabled || config.fp16.enabled;
  const bool zero = config.zero.stage >= 1;
  if (half || zero)
    FATHOM_CHECK(!optimizer, "initialize: with ",
                 zero                  ? "ZeRO"
                 : config.bf16.enabled ? "bf16 enabled"
                                       : "fp16 enabled",
                 " the engine builds the optimizer over ", zero ? "this rank's shard" : "fp32 master weights",
                 "; describe it in the config's \"optimizer\" section instead of passing one");
  if (optimizer)
    FATHOM_CHECK(config.optimizer.type.empty(),
                 "initialize: an optimizer was passed and the config has an "
                 "\"optimizer\" section too; remove one of them");
  else
    FATHOM_CHECK(!config.optimizer.type.empty(),
                 "initialize: no optimizer; add an \"optimizer\" section to the "
                 "config (e.g. {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4}}) or pass one to fathom::initialize");
  const zero::OptimizerFactory make_optimizer = [&](const zero::NamedParameters& named) {
    if (optimizer) return optimizer;
    if (parallel::is_compressed_optimizer(config.optimizer.type))
      return std::shared_ptr<nn::Optimizer>(parallel::make_compressed_optimizer(
          config.optimizer.type, config.optimizer.params, nn::single_group(named), groups.data_ptr()));
    return std::shared_ptr<nn::Optimizer>(nn::make_optimizer(config.optimizer.type, config.optimizer.params, named));
  };

  Initialized out;
  std::unique_ptr<zero::TrainingState> state = make_training_state(config, *model, layout, make_optimizer);
  out.optimizer = state->optimizer();
  if (!config.scheduler.type.empty()) {
    std::vector<double> base_lrs;
    for (size_t g = 0; g < out.optimizer->param_groups().size(); ++g) base_lrs.push_back(out.optimizer->lr(g));
    out.scheduler = nn::make_lr_scheduler(config.scheduler.type, config.scheduler.params, base_lrs);
  }

  // The job's first rank writes the monitors' files and prints the progress line.
  const bool first_rank = groups.data().rank() == 0 && groups.tensor().rank() == 0 && groups.pipeline().rank() == 0;
  EngineOptions options = engine_options(config, dp_world_size);
  options.print_progress = first_rank || log_all_ranks();
  std::optional<LossScalerOptions> fp16;
  if (config.fp16.enabled) fp16 = from_config(config.fp16);
  auto* pipeline = dynamic_cast<parallel::PipelineModule*>(model.get());
  out.engine = std::make_shared<Engine>(std::move(model), std::move(state), out.scheduler, options, fp16);
  if (pipeline) out.engine->set_schedule(pipeline_schedule(config, *pipeline, options.gradient_accumulation_steps));
  out.engine->set_config_json(config.to_json());
  out.engine->set_monitor(make_monitors(config, first_rank));
  attach_profilers(config, *out.engine, groups, first_rank);

  if (training_data) {
    DataLoaderOptions loader;
    loader.micro_batch_size = options.micro_batch_size;
    loader.gradient_accumulation_steps = options.gradient_accumulation_steps;
    loader.dp_rank = groups.data().rank();
    loader.dp_world_size = dp_world_size;
    loader.seed = options.seed;
    loader.drop_last = config.dataloader_drop_last.value_or(true);
    out.loader = std::make_shared<DataLoader>(std::move(training_data), loader);
    out.engine->attach_data_loader(out.loader);
  }
  return out;
}

std::shared_ptr<Engine> initialize_for_evaluation(Config config, std::shared_ptr<nn::Module> model,
                                                  const parallel::ProcessGroups& groups) {
  FATHOM_CHECK(model != nullptr, "initialize_for_evaluation: the model is null");
  const zero::ParallelLayout layout = prepare(config, *model, groups);
  std::unique_ptr<zero::TrainingState> state = make_training_state(config, *model, layout, nullptr);
  auto engine = std::make_shared<Engine>(std::move(model), std::move(state), nullptr,
                                         engine_options(config, groups.data().size()));
  engine->set_config_json(config.to_json());
  return engine;
}

Initialized initialize(Config config, std::shared_ptr<nn::Module> model, std::shared_ptr<nn::Optimizer> optimizer,
                       std::shared_ptr<const Dataset> training_data,
                       std::shared_ptr<parallel::Communicator> data_parallel_group) {
  if (!data_parallel_group) data_parallel_group = std::make_shared<parallel::LocalCommunicator>();
  return initialize(std::move(config), std::move(model), std::move(optimizer), std::move(training_data),
                    parallel::ProcessGroups::data_parallel(std::move(data_parallel_group)));
}

}  // namespace fathom
