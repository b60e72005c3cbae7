#include "gpt_training.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <optional>

#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "zero/sharded_state.h"
#include "models/decoder.h"
#include "nn/deferred_init.h"
#include "nn/loss.h"
#include "parallel/pipeline_module.h"
#include "parallel/pipeline_transport.h"

namespace fathom::testing {
namespace {
std::shared_ptr<TokenDataset> token_data() {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 96 * 16 + 1; ++i) tokens.push_back(static_cast<uint16_t>((i * 37 + i / 7 + i * i % 13) % 61));
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, 16, 64));
}

// GPT-2's configuration of the decoder, 30 wide: parameter counts not divisible by the world
// sizes 2, 3, 4.
models::DecoderConfig tiny_gpt() {
  models::DecoderConfig c = models::DecoderConfig::gpt2(/*n_layer=*/2, /*n_head=*/2, /*width=*/30, /*vocab_size=*/61,
                                                        /*positions=*/16);
  c.dropout = 0.1;
  // No biases (nanoGPT's bias=False): the attention key bias gets an exactly-zero gradient in exact
  // arithmetic (a constant shift of each query's scores), so its gradient is pure rounding noise
  // that Adam normalises into full-size steps; any change of summation order then moves it by ~lr.
  c.qkv_bias = c.o_bias = c.mlp_bias = c.norm_bias = false;
  return c;
}

double norm(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}
}  // namespace

Initialized start_tiny_gpt(const std::string& config, std::shared_ptr<parallel::Communicator> group,
                           bool activation_checkpointing, Device device, double dropout) {
  const int rank = group ? group->rank() : 0;
  models::DecoderConfig gpt = tiny_gpt();
  gpt.dropout = dropout;
  auto model = std::make_shared<models::Decoder>(gpt, 1000 + rank);
  if (activation_checkpointing) model->set_checkpointing(nn::checkpoint_layers_of_type(*model, "DecoderLayer"));
  model->to(device);
  return initialize(Config::from_string(config), model, nullptr, token_data(), group);
}

namespace {
// The mean cross-entropy of a batch's logits, unless a model has its own (vocabulary-parallel).
LossFunction plain_loss(Device device) {
  return [device](const autograd::Variable& logits, const Batch& batch) {
    return nn::cross_entropy(logits, batch.targets.to(device), batch.loss_normaliser);
  };
}

// The steps, and the collectives issued by backwards that do not end a cycle.
int64_t run_steps(Initialized& init, int steps, std::vector<double>* losses, Device device,
                  const LossFunction& loss = nullptr) {
  const LossFunction& loss_of = loss ? loss : plain_loss(device);
  const int64_t last = init.engine->global_steps() + steps;
  parallel::Communicator* group = &init.engine->training_state().data_group();
  int64_t outside_boundaries = 0;
  std::vector<double> seen;
  init.engine->on_step([&](const StepReport& r) { seen.push_back(r.loss); });
  while (init.engine->global_steps() < last) {
    for (const Batch& batch : *init.loader) {
      const autograd::Variable logits =
          (*init.engine)(autograd::Variable(batch.inputs.to(device)), batch.sample_index);
      const bool boundary = init.engine->is_gradient_accumulation_boundary();
      const int64_t before = group->collectives_issued();
      init.engine->backward(loss_of(logits, batch));
      if (!boundary) outside_boundaries += group->collectives_issued() - before;
      init.engine->step();
      if (init.engine->global_steps() >= last) break;
    }
  }
  init.engine->on_step(nullptr);
  if (losses) losses->insert(losses->end(), seen.begin(), seen.end());
  return outside_boundaries;
}
}  // namespace

models::DecoderConfig tiny_gpt_config() { return tiny_gpt(); }

void train_steps(Initialized& init, int steps, std::vector<double>* losses, Device device) {
  run_steps(init, steps, losses, device);
}

namespace {
TrainingRun train(Initialized init, std::shared_ptr<parallel::Communicator> group, int steps, Device device,
                  const LossFunction& loss = nullptr) {
  TrainingRun run;
  run.engine = init.engine;
  const int64_t outside = run_steps(init, steps, &run.losses, device, loss);
  if (group) run.collectives_outside_boundaries = outside;
  // Stage 3 keeps shards only: gather the whole model to compare it.
  if (const zero::ShardedState* zero = zero::as_sharded(init.engine->training_state()); zero && zero->gatherer())
    run.zero3_peak_gathered = zero->gatherer()->peak_gathered_elements();
  for (const auto& [name, tensor] : init.engine->consolidated_state_dict())
    run.weights.emplace_back(name, tensor.to(DType::F64));
  return run;
}
}  // namespace

TrainingRun train_tiny_gpt(const std::string& config, std::shared_ptr<parallel::Communicator> group, int steps,
                           bool activation_checkpointing, Device device, double dropout) {
  return train(start_tiny_gpt(config, group, activation_checkpointing, device, dropout), group, steps, device);
}

TrainingRun train_tiny_gpt_same_seed(const std::string& config, std::shared_ptr<parallel::Communicator> group,
                                     int steps, bool deferred) {
  std::shared_ptr<models::Decoder> model;
  {
    std::optional<nn::DeferredInit> scope;
    if (deferred) scope.emplace();
    model = std::make_shared<models::Decoder>(tiny_gpt(), 1000);
  }
  return train(initialize(Config::from_string(config), model, nullptr, token_data(), group), group, steps, kCPU);
}

TrainingRun train_module(const std::string& config, std::shared_ptr<nn::Module> model,
                         const parallel::ProcessGroups* groups, int steps, const LossFunction& loss,
                         std::shared_ptr<const Dataset> data) {
  const auto pipeline = std::dynamic_pointer_cast<parallel::PipelineModule>(model);
  if (!data) data = token_data();
  if (!groups) return train(initialize(Config::from_string(config), model, nullptr, data), nullptr, steps, kCPU, loss);
  if (!pipeline) return train(initialize(Config::from_string(config), model, nullptr, data, *groups),
                              groups->data_ptr(), steps, kCPU, loss);
  Initialized init = initialize(Config::from_string(config), model, nullptr, data, *groups);
  TrainingRun run;
  run.engine = init.engine;
  std::optional<DataLoader::Iterator> position;
  const NextBatch next = [&] {
    if (!position || *position == std::default_sentinel) position.emplace(init.loader->begin());
    Batch batch = **position;
    ++*position;
    return batch;
  };
  for (int s = 0; s < steps; ++s)
    run.losses.push_back(init.engine->train_batch(next, loss ? loss : plain_loss(kCPU)).loss);
  for (const auto& [name, tensor] : parallel::gather_to_first_stage(*pipeline, init.engine->consolidated_state_dict()))
    run.weights.emplace_back(name, tensor.to(DType::F64));
  return run;
}

void require_equivalent(const TrainingRun& alone, const TrainingRun& parallel, double bound) {
  REQUIRE(!alone.losses.empty());
  REQUIRE(parallel.losses.size() == alone.losses.size());
  for (size_t s = 0; s < alone.losses.size(); ++s) {
    INFO("step " << s + 1 << ": alone " << alone.losses[s] << ", parallel " << parallel.losses[s]);
    REQUIRE(std::fabs(parallel.losses[s] - alone.losses[s]) / std::fabs(alone.losses[s]) < bound);
  }
  REQUIRE(alone.weights.size() == parallel.weights.size());
  for (size_t i = 0; i < alone.weights.size(); ++i) {
    const std::vector<double> a = alone.weights[i].second.to_vector<double>();
    const std::vector<double> b = parallel.weights[i].second.to_vector<double>();
    REQUIRE(a.size() == b.size());
    std::vector<double> difference(a.size());
    for (size_t k = 0; k < a.size(); ++k) difference[k] = a[k] - b[k];
    INFO(alone.weights[i].first << ": |dw| / |w| = " << norm(difference) / norm(a));
    REQUIRE(norm(difference) / norm(a) < bound);
  }
  // Training moved the weights (a run that learned nothing would compare equal trivially).
  REQUIRE(alone.losses.back() < alone.losses.front());
}

}  // namespace fathom::testing
