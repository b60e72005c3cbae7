#include "engine/initialize.h"

#include <cctype>

#include "nn/optimizer_factory.h"
#include "parallel/local_communicator.h"

namespace fathom {

Initialized initialize(Config config, std::shared_ptr<nn::Module> model, std::shared_ptr<nn::Optimizer> optimizer,
                       std::shared_ptr<const data::Dataset> training_data,
                       std::shared_ptr<distributed::Communicator> data_parallel_group) {
  FATHOM_CHECK(model != nullptr, "initialize: the model is null");
  const int64_t dp_world_size = data_parallel_group ? data_parallel_group->size() : 1;
  const int64_t dp_rank = data_parallel_group ? data_parallel_group->rank() : 0;
  config.check_supported();
  config.resolve_batch(dp_world_size);
  // Every rank starts from rank 0's weights, whatever each rank's initialisation drew.
  if (dp_world_size > 1)
    for (const auto& [name, param] : model->named_parameters()) data_parallel_group->broadcast(param.data(), 0);

  Initialized out;
  MixedPrecision mixed;
  DataParallel data_parallel;
  const bool half = config.bf16.enabled || config.fp16.enabled;
  const bool zero = config.zero.stage >= 1;
  if (half) model->to(config.bf16.enabled ? DType::BF16 : DType::F16);  // the model computes in 16 bits
  if (half || zero)
    FATHOM_CHECK(!optimizer, "initialize: with ", zero ? "ZeRO" : config.bf16.enabled ? "bf16 enabled" : "fp16 enabled",
                 " the engine builds the optimizer over ", zero ? "this rank's shard" : "fp32 master weights",
                 "; describe it in the config's \"optimizer\" section instead of passing one");
  if (optimizer) {
    FATHOM_CHECK(config.optimizer.type.empty(), "initialize: an optimizer was passed and the config has an "
                 "\"optimizer\" section too; remove one of them");
    out.optimizer = std::move(optimizer);
  } else {
    FATHOM_CHECK(!config.optimizer.type.empty(), "initialize: no optimizer; add an \"optimizer\" section to the "
                 "config (e.g. {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4}}) or pass one to fathom::initialize");
  }
  const auto make_optimizer = [&](const std::vector<std::pair<std::string, autograd::Variable>>& named) {
    return std::shared_ptr<nn::Optimizer>(nn::make_optimizer(config.optimizer.type, config.optimizer.params, named));
  };
  if (zero) {
    // ZeRO stages 1-2: fp32 masters (16-bit models), optimizer states and (stage 2) gradients
    // exist for this rank's shard only. One process gets a one-rank communicator.
    std::string type = config.optimizer.type;
    for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    FATHOM_CHECK(type != "lamb", "config error at optimizer.type: Lamb computes a trust ratio per parameter, which "
                 "a ZeRO shard (a slice of the flattened parameters) does not have; use Adam, AdamW, SGD or Lion "
                 "with zero_optimization.stage ", config.zero.stage, ", or stage 0");
    auto group = data_parallel_group ? data_parallel_group : std::make_shared<distributed::LocalCommunicator>();
    data_parallel.group = group;
    data_parallel.zero = std::make_shared<zero::ZeroOptimizer>(
        model->named_parameters(), group,
        zero::ZeroOptions{.stage = static_cast<int>(config.zero.stage),
                          .reduce_bucket_elements = config.zero.reduce_bucket_size,
                          .allgather_bucket_elements = config.zero.allgather_bucket_size,
                          .overlap_comm = config.zero.overlap_comm,
                          .accumulate_in_fp32 = config.batch.gradient_accumulation_steps > 1,
                          .gather = {.persistence_threshold = config.zero.param_persistence_threshold,
                                     .prefetch_elements = config.zero.prefetch_bucket_size,
                                     .max_live_elements = config.zero.max_live_parameters,
                                     .max_reuse_distance = config.zero.max_reuse_distance}},
        make_optimizer, model.get());
    out.optimizer = data_parallel.zero->optimizer();
  } else {
    if (half) mixed.masters = std::make_shared<MasterWeights>(model->named_parameters());
    if (!out.optimizer) out.optimizer = make_optimizer(half ? mixed.masters->masters() : model->named_parameters());
  }
  if (config.fp16.enabled) mixed.fp16 = from_config(config.fp16);
  if (!config.scheduler.type.empty()) {
    std::vector<double> base_lrs;
    for (size_t g = 0; g < out.optimizer->param_groups().size(); ++g) base_lrs.push_back(out.optimizer->lr(g));
    out.scheduler = nn::make_lr_scheduler(config.scheduler.type, config.scheduler.params, base_lrs);
  }

  EngineOptions options;
  options.micro_batch_size = config.batch.train_micro_batch_size_per_gpu;
  options.gradient_accumulation_steps = config.batch.gradient_accumulation_steps;
  options.dp_world_size = dp_world_size;
  options.gradient_clipping = config.gradient_clipping;
  options.steps_per_print = config.steps_per_print;
  options.wall_clock_breakdown = config.wall_clock_breakdown;
  options.seed = config.seed.value_or(1234);
  if (!zero && dp_world_size > 1) {
    // Gradients are reduced where the optimizer reads them: the fp32 masters in mixed precision.
    std::vector<distributed::ReducedParameter> reduced;
    const auto named = model->named_parameters();
    for (size_t i = 0; i < named.size(); ++i)
      reduced.push_back({named[i].first, named[i].second, half ? mixed.masters->masters()[i].second : named[i].second});
    data_parallel.group = data_parallel_group;
    data_parallel.reducer = std::make_shared<distributed::GradientReducer>(
        data_parallel_group, std::move(reduced),
        distributed::GradientReducerOptions{.bucket_elements = config.zero.reduce_bucket_size,
                                            .overlap = config.zero.overlap_comm});
  }
  out.engine = std::make_shared<Engine>(std::move(model), out.optimizer, out.scheduler, options, std::move(mixed),
                                        std::move(data_parallel));
  out.engine->set_config_json(config.to_json());

  if (training_data) {
    data::DataLoaderOptions loader;
    loader.micro_batch_size = options.micro_batch_size;
    loader.gradient_accumulation_steps = options.gradient_accumulation_steps;
    loader.dp_rank = dp_rank;
    loader.dp_world_size = dp_world_size;
    loader.seed = options.seed;
    out.loader = std::make_shared<data::DataLoader>(std::move(training_data), loader);
    out.engine->attach_data_loader(out.loader);
  }
  return out;
}

}  // namespace fathom
