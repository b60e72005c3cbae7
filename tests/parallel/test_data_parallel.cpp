// Data parallelism computes the single-process function: a small GPT with dropout trained for
// 20 steps on the same global batch reproduces, at every world size, the loss trajectory and
// final weights each rank also computes alone (f32: rel. diff < 1e-5; bf16: < 1e-2).
#include <cmath>
#include <cstdlib>

#include "autograd/functions.h"
#include "engine/initialize.h"
#include "nn/linear.h"
#include "gpt_training.h"
#include "mpi_test_util.h"
#include "test_util.h"
#include "zero/replicated_state.h"

using namespace fathom;
using fathom::testing::require_equivalent;
using fathom::testing::runtime;
using fathom::testing::train_tiny_gpt;
using fathom::testing::TrainingRun;

namespace {
constexpr int kSteps = 20;
constexpr int kGlobalBatch = 8;

std::string config_text(int gas, const std::string& extra) {
  return detail::concat(R"({"train_batch_size": )", kGlobalBatch, R"(, "gradient_accumulation_steps": )", gas,
                        R"(, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}},
      "gradient_clipping": 1.0, "seed": 7)", extra, "}");
}

TrainingRun train(int gas, std::shared_ptr<parallel::Communicator> group, const std::string& extra = "") {
  return train_tiny_gpt(config_text(gas, extra), std::move(group), kSteps);
}
}  // namespace

TEST_CASE("DP at this world size reproduces one process: losses and final weights (f32)", "[parallel]") {
  const auto& world = runtime().world_ptr();
  const TrainingRun alone = train(/*gas=*/1, nullptr);
  for (int gas : {1, 2}) {
    if (kGlobalBatch % (gas * world->size()) != 0) continue;
    INFO("gradient_accumulation_steps " << gas << ", " << world->size() << " ranks");
    const TrainingRun parallel = train(gas, world);
    require_equivalent(alone, parallel, 1e-5);
    // Accumulation steps that do not end a cycle communicate nothing.
    CHECK(parallel.collectives_outside_boundaries == 0);
  }
}

TEST_CASE("DP in bf16 with fp32 masters follows one process within the 16-bit bound", "[parallel]") {
  const auto& world = runtime().world_ptr();
  const std::string bf16 = R"(, "bf16": {"enabled": true})";
  const TrainingRun alone = train(1, nullptr, bf16);
  const TrainingRun parallel = train(kGlobalBatch % (2 * world->size()) == 0 ? 2 : 1, world, bf16);
  require_equivalent(alone, parallel, 1e-2);
}

TEST_CASE("the gemm attention kernel trains like the fused one (bf16, one process)", "[parallel]") {
  // bf16's default (nn/attention_kernel.h) against the flash-style kernel: the scores are
  // rounded to bf16 before the softmax, so the bound is the 16-bit one.
  const std::string bf16 = R"(, "bf16": {"enabled": true})";
  setenv("FATHOM_ATTENTION", "fused", 1);
  const TrainingRun fused = train(1, nullptr, bf16);
  setenv("FATHOM_ATTENTION", "gemm", 1);
  const TrainingRun gemm = train(1, nullptr, bf16);
  unsetenv("FATHOM_ATTENTION");
  require_equivalent(fused, gemm, 1e-2);
}

TEST_CASE("overlap: the first bucket's all-reduce is issued before backward ends; off, after", "[parallel]") {
  const auto& world = runtime().world_ptr();
  if (world->size() == 1) return;  // one rank reduces nothing
  const std::string small_buckets = R"(, "zero_optimization": {"stage": 0, "reduce_bucket_size": 2000)";
  const TrainingRun overlapped = train(1, world, small_buckets + "}");
  const TrainingRun after = train(1, world, small_buckets + R"(, "overlap_comm": false})");
  using Event = parallel::GradientReducer::Event;
  for (const auto* run : {&overlapped, &after}) {
    const auto* state = dynamic_cast<const zero::ReplicatedState*>(&run->engine->training_state());
    REQUIRE(state != nullptr);
    const parallel::GradientReducer* reducer = state->reducer();
    REQUIRE(reducer != nullptr);
    REQUIRE(reducer->num_buckets() > 2);
    const std::vector<Event>& events = reducer->events();
    size_t backward_end = 0, first_issue = events.size();
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].kind == Event::BackwardEnded) backward_end = i;
      if (events[i].kind == Event::BucketIssued && first_issue == events.size()) first_issue = i;
    }
    REQUIRE(first_issue < events.size());
    if (run == &overlapped) CHECK(first_issue < backward_end);
    else CHECK(first_issue > backward_end);
  }
  // Overlap changes when buckets are reduced, not what they compute.
  require_equivalent(after, overlapped, 1e-12);
}

TEST_CASE("an overflow on one rank stops every rank at the same step, with the same message", "[parallel]") {
  const auto& world = runtime().world_ptr();
  auto model = std::make_shared<nn::Linear>(3, 2);
  Initialized init = initialize(Config::from_string(detail::concat(R"({"train_batch_size": )", 2 * world->size(),
                                                                   R"(, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})")),
                                model, nullptr, nullptr, world);
  // Only the last rank's data overflows; the job-wide gradient norm carries it to every rank.
  const float value = world->rank() == world->size() - 1 ? INFINITY : 1.0f;
  const std::string message = fathom::testing::error_of([&] {
    init.engine->backward(autograd::sum((*init.engine)(autograd::Variable(Tensor::full({2, 3}, value)))));
    init.engine->step();
  });
  CHECK(message.rfind("step 1: the loss is ", 0) == 0);
  CHECK(message.find("every weight is finite, so this step's loss or gradients overflowed") != std::string::npos);
  CHECK(init.engine->global_steps() == 0);
}

TEST_CASE("the progress line is the first rank's only, unless FATHOM_LOG_ALL_RANKS=1", "[parallel]") {
  const auto& world = runtime().world_ptr();
  const auto config = [&] {
    return Config::from_string(detail::concat(R"({"train_batch_size": )", 2 * world->size(),
                                              R"(, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})"));
  };
  auto model = std::make_shared<nn::Linear>(3, 2);
  CHECK(initialize(config(), model, nullptr, nullptr, world).engine->options().print_progress == (world->rank() == 0));
  setenv("FATHOM_LOG_ALL_RANKS", "1", 1);
  CHECK(initialize(config(), model, nullptr, nullptr, world).engine->options().print_progress);
  unsetenv("FATHOM_LOG_ALL_RANKS");
}
