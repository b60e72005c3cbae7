// 1-bit Adam: during its warm-up it is its uncompressed twin (DeepSpeed's rule: no bias
// correction, decoupled weight decay, a first step that only initialises the moments — here
// AdamW without bias correction whose first step has lr 0); after the freeze it sends compressed
// momenta and still trains the tiny GPT about as well as Adam.
#include <cmath>
#include <filesystem>
#include <numeric>

#include "autograd/functions.h"
#include "engine/initialize.h"
#include "gpt_training.h"
#include "mpi_test_util.h"
#include "nn/containers.h"
#include "nn/linear.h"
#include "nn/safetensors.h"
#include "parallel/onebit_adam.h"
#include "regression_job.h"
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
  // Measured (mean loss of the last 5 steps; AdamW 2.665, start 4.120): 1-bit Adam 2.733 at 1 rank,
  // 2.683 at 2, 2.708 at 3, 2.712 at 4.
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
      Catch::Contains("\"comm_backend_name\" must be one of nccl, mpi, compressed, got \"gloo\""));
  const Config zero1 = Config::from_string(detail::concat(
      R"({"train_batch_size": )", world->size(),
      R"(, "optimizer": {"type": "OnebitAdam"}, "zero_optimization": {"stage": 1}})"));
  CHECK_THROWS_WITH(initialize(zero1, model, nullptr, nullptr, world),
                    Catch::Contains("config error at zero_optimization.stage: OnebitAdam communicates its own "
                                    "compressed momentum") && Catch::Contains("stage is 1, use 0"));
}

namespace {
// The regression with 1-bit Adam (freeze_step 4), saved at `save_at` or resumed from `dir`.
fathom::testing::RegressionRun onebit_regression(int steps, int save_at, const std::string& dir, bool resume,
                                                 std::shared_ptr<parallel::Communicator> world = nullptr) {
  return fathom::testing::run_regression(
      {.optimizer = R"({"type": "OneBitAdam", "params": {"lr": 0.01, "freeze_step": 4, "comm_backend_name": "mpi"}})",
       .steps = steps, .checkpoint_dir = dir, .save_at = save_at, .resume = resume, .world = std::move(world)});
}
}  // namespace

TEST_CASE("a run resumed after the freeze is bit-identical: the error feedback is checkpointed per rank", "[onebit]") {
  const auto& world = runtime().world_ptr();
  const std::string dir = fathom::testing::fresh_checkpoint_dir("fathom_onebit_resume", *world);
  const std::vector<Tensor> straight = onebit_regression(14, 9, dir, false).weights;  // saved at 9, compressed since 5
  const std::vector<Tensor> resumed = onebit_regression(14, -1, dir, true).weights;
  REQUIRE(straight.size() == resumed.size());
  for (size_t i = 0; i < straight.size(); ++i) FATHOM_REQUIRE_CLOSE(resumed[i], straight[i], 0.0, 0.0);
}

TEST_CASE("a checkpoint saved at several ranks resumes at one: the error feedback is not loaded, training goes on", "[onebit]") {
  const auto& world = runtime().world_ptr();
  if (world->size() == 1) return;  // needs a second world size
  const std::string dir = fathom::testing::fresh_checkpoint_dir("fathom_onebit_reshape", *world);
  onebit_regression(9, 9, dir, false);  // saved at 2+ ranks, compressing since step 5
  world->barrier();
  // Each rank alone resumes it (its own one-rank group), and trains 3 more steps.
  const auto self = world->split(world->rank(), 0, "self");
  const std::shared_ptr<nn::Optimizer> optimizer = onebit_regression(12, -1, dir, true, self).optimizer;
  REQUIRE(optimizer != nullptr);
  CHECK(dynamic_cast<const parallel::OneBitAdam&>(*optimizer).compressing());
  CHECK(optimizer->rank_local_state().empty());  // the saved ranks' buffers were not taken
  world->barrier();
}

TEST_CASE("a damaged error-feedback file is an error naming it, not a silent restart", "[onebit]") {
  const auto& world = runtime().world_ptr();
  if (world->size() == 1) return;  // one rank compresses nothing, so nothing is saved per rank
  const std::string dir = fathom::testing::fresh_checkpoint_dir("fathom_onebit_damaged", *world);
  onebit_regression(6, 6, dir, false);  // compressing since step 5
  const std::filesystem::path tag = std::filesystem::path(dir) / "global_step6";
  std::vector<std::filesystem::path> local_files;
  for (const auto& entry : std::filesystem::directory_iterator(tag))
    if (entry.path().filename().string().find(".optim_local.") != std::string::npos) local_files.push_back(entry.path());
  REQUIRE(local_files.size() == static_cast<size_t>(world->size()));
  world->barrier();
  // Truncated: the reader names the file. Every rank's file is damaged, so every rank fails alike.
  if (world->rank() == 0)
    for (const auto& file : local_files) std::filesystem::resize_file(file, 4);
  world->barrier();
  CHECK_THROWS_WITH(onebit_regression(7, -1, dir, true), Catch::Contains(".optim_local.safetensors': file is 4 bytes"));
  world->barrier();
  // A readable file without the buffers: named too.
  if (world->rank() == 0)
    for (const auto& file : local_files) nn::save_safetensors(file.string(), {{"unrelated", Tensor::zeros({2})}});
  world->barrier();
  CHECK_THROWS_WITH(onebit_regression(7, -1, dir, true),
                    Catch::Contains("no tensor local.0; the file is damaged, or from another run"));
  world->barrier();
}
