// 1-bit Adam: during its warm-up it is its uncompressed twin (DeepSpeed's rule: no bias
// correction, decoupled weight decay, a first step that only initialises the moments — here
// AdamW without bias correction whose first step has lr 0); after the freeze it sends compressed
// momenta and still trains the tiny GPT about as well as Adam.
#include <numeric>

#include "engine/initialize.h"
#include "gpt_training.h"
#include "regression_job.h"
#include "mpi_test_util.h"
#include "autograd/functions.h"
#include "nn/containers.h"
#include "nn/linear.h"
#include <cmath>
#include <filesystem>
#include "parallel/onebit_adam.h"
#include "test_util.h"

using namespace fathom;
using fathom::testing::require_equivalent;
using fathom::testing::runtime;
using fathom::testing::train_tiny_gpt;
using fathom::testing::TrainingRun;

namespace {
constexpr int kGlobalBatch = 24;

// Both runs share the schedule: lr 0 at the first step, so the twin's first step only moves its
// moments, as 1-bit Adam's initialisation step does.
std::string config_text(const std::string& optimizer, int gas = 1) {
  return detail::concat(R"({"train_batch_size": )", kGlobalBatch, R"(, "gradient_accumulation_steps": )", gas,
                        R"(, "seed": 7, "optimizer": )", optimizer,
                        R"(, "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 2e-3,
                            "warmup_num_steps": 2, "warmup_type": "linear"}}})");
}

std::string onebit(int64_t freeze_step) {
  return detail::concat(R"({"type": "OneBitAdam", "params": {"lr": 2e-3, "weight_decay": 0.1, "freeze_step": )",
                        freeze_step, R"(, "comm_backend_name": "mpi"}})");
}
const std::string kTwin = R"({"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.1, "bias_correction": false}})";

double tail_mean(const std::vector<double>& losses, size_t n) {
  return std::accumulate(losses.end() - static_cast<long>(n), losses.end(), 0.0) / static_cast<double>(n);
}
}  // namespace

TEST_CASE("1-bit Adam's warm-up is its uncompressed twin", "[onebit]") {
  const auto& world = runtime().world_ptr();
  for (int gas : {1, 2}) {
    INFO(world->size() << " ranks, gradient_accumulation_steps " << gas);
    const TrainingRun twin = train_tiny_gpt(config_text(kTwin, gas), world, 10);
    const TrainingRun warming = train_tiny_gpt(config_text(onebit(1000), gas), world, 10);
    require_equivalent(twin, warming, 1e-6);
    const auto& optimizer = dynamic_cast<const parallel::OneBitAdam&>(*warming.engine->optimizer());
    CHECK(!optimizer.compressing());
    CHECK(optimizer.compressed_steps() == 0);
    // And against one process on the whole batch: data parallelism's own rounding only.
    require_equivalent(train_tiny_gpt(config_text(kTwin, gas), nullptr, 10), warming, 1e-5);
  }
}

TEST_CASE("after the freeze 1-bit Adam sends compressed momenta and trains within 5% of Adam", "[onebit]") {
  const auto& world = runtime().world_ptr();
  constexpr int kSteps = 40, kFreeze = 20;  // half the steps compressed
  const TrainingRun adam = train_tiny_gpt(config_text(kTwin), world, kSteps);
  const TrainingRun compressed = train_tiny_gpt(config_text(onebit(kFreeze)), world, kSteps);
  const auto& optimizer = dynamic_cast<const parallel::OneBitAdam&>(*compressed.engine->optimizer());
  CHECK(optimizer.compressing());
  if (world->size() > 1) CHECK(optimizer.compressed_steps() == kSteps - kFreeze);
  const double a = tail_mean(adam.losses, 5), b = tail_mean(compressed.losses, 5);
  INFO("mean loss of the last 5 of " << kSteps << " steps at " << world->size() << " ranks: Adam " << a
                                     << ", 1-bit Adam " << b << " (start " << adam.losses.front() << ")");
  CHECK(b < adam.losses.front() * 0.9);  // it learned
  CHECK(std::fabs(b - a) / a < 0.05);
  // Every rank holds the same weights: the compressed mean is the same everywhere.
  for (const auto& [name, weight] : compressed.weights) {
    Tensor max = weight.clone(), min = weight.clone();
    world->all_reduce(max, parallel::ReduceOp::Max);
    world->all_reduce(min, parallel::ReduceOp::Min);
    INFO(name);
    FATHOM_REQUIRE_CLOSE(max, min, 0.0, 0.0);
  }
}

TEST_CASE("1-bit Adam's bad settings are errors naming them", "[onebit]") {
  const auto& world = runtime().world_ptr();
  auto model = std::make_shared<nn::Linear>(4, 2);
  CHECK_THROWS_WITH(
      Config::from_string(config_text(R"({"type": "OneBitAdam", "params": {"freeze_step": -3}})")),
      Catch::Contains("optimizer.params.freeze_step") && Catch::Contains("\"freeze_step\" must be a whole number >= 0, got -3"));
  CHECK_THROWS_WITH(
      Config::from_string(config_text(R"({"type": "OneBitAdam", "params": {"comm_backend_name": "gloo"}})")),
      Catch::Contains("\"comm_backend_name\" must be one of nccl, mpi, got \"gloo\""));
  const Config zero1 = Config::from_string(detail::concat(
      R"({"train_batch_size": )", world->size(),
      R"(, "optimizer": {"type": "OnebitAdam"}, "zero_optimization": {"stage": 1}})"));
  CHECK_THROWS_WITH(initialize(zero1, model, nullptr, nullptr, world),
                    Catch::Contains("config error at zero_optimization.stage: OnebitAdam communicates its own "
                                    "compressed momentum") && Catch::Contains("stage is 1, use 0"));
}

namespace {
// A small regression trained by the engine with 1-bit Adam (freeze_step 4), checkpointed at
// `save_at` and resumed from `resume_from` when given; returns the final weights.
std::vector<Tensor> regression_run(int steps, int save_at, const std::string& dir, bool resume,
                                   std::shared_ptr<parallel::Communicator> world = runtime().world_ptr(),
                                   std::shared_ptr<nn::Optimizer>* optimizer = nullptr) {
  const int n = world->size(), rank = world->rank();
  auto model = fathom::testing::regression_model();
  const Config config = Config::from_string(detail::concat(
      R"({"train_batch_size": )", 2 * n, R"(, "optimizer": {"type": "OneBitAdam", "params": {"lr": 0.01,
          "freeze_step": 4, "comm_backend_name": "mpi"}}})"));
  Initialized init = initialize(config, model, nullptr, nullptr, world);
  if (resume) init.engine->load_checkpoint(dir);
  while (init.engine->global_steps() < steps) {
    init.engine->backward(fathom::testing::regression_loss(*init.engine, init.engine->global_steps(), rank));
    init.engine->step();
    if (init.engine->global_steps() == save_at) init.engine->save_checkpoint(dir);
  }
  if (optimizer) *optimizer = init.engine->optimizer();
  std::vector<Tensor> weights;
  for (const auto& [name, p] : model->named_parameters()) weights.push_back(p.data().clone());
  return weights;
}
}  // namespace

TEST_CASE("a run resumed after the freeze is bit-identical: the error feedback is checkpointed per rank", "[onebit]") {
  const auto& world = runtime().world_ptr();
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("fathom_onebit_resume_np" + std::to_string(world->size()))).string();
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier();
  const std::vector<Tensor> straight = regression_run(14, 9, dir, false);  // saves at step 9, compressed since 5
  const std::vector<Tensor> resumed = regression_run(14, -1, dir, true);
  REQUIRE(straight.size() == resumed.size());
  for (size_t i = 0; i < straight.size(); ++i) FATHOM_REQUIRE_CLOSE(resumed[i], straight[i], 0.0, 0.0);
}

TEST_CASE("a checkpoint saved at several ranks resumes at one: the error feedback is not loaded, training goes on", "[onebit]") {
  const auto& world = runtime().world_ptr();
  if (world->size() == 1) return;  // needs a second world size
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("fathom_onebit_reshape_np" + std::to_string(world->size()))).string();
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier();
  regression_run(9, 9, dir, false);  // saved at 2+ ranks, compressing since step 5
  world->barrier();
  // Each rank alone resumes it (its own one-rank group), and trains 3 more steps.
  const auto self = world->split(world->rank(), 0, "self");
  std::shared_ptr<nn::Optimizer> optimizer;
  regression_run(12, -1, dir, true, self, &optimizer);
  REQUIRE(optimizer != nullptr);
  CHECK(dynamic_cast<const parallel::OneBitAdam&>(*optimizer).compressing());
  CHECK(optimizer->rank_local_state().empty());  // the saved ranks' buffers were not taken
  world->barrier();
}
