// ZeRO stages 1, 2 and 3 compute the single-process function: stages 0-3 x f32 and bf16 x
// gradient accumulation 1 and 2 at this world size (CTest runs 1, 2, 3 and 4 ranks) reproduce
// the stage-0 one-process run's losses and final (gathered) weights — f32 within 1e-5, bf16
// within 1e-2 — on a tiny GPT whose parameter count no world size divides.
#include <filesystem>

#include "autograd/functions.h"
#include "core/memory_stats.h"
#include "core/shape_ops.h"
#include "engine/initialize.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "gpt_training.h"
#include "mpi_test_util.h"
#include "test_util.h"
#include "zero/sharded_state.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::require_equivalent;
using fathom::testing::runtime;
using fathom::testing::train_tiny_gpt;
using fathom::testing::TrainingRun;

namespace {
constexpr int kSteps = 12;
constexpr int kGlobalBatch = 24;  // divisible by every world size x gas here

// lr 5e-4: bf16 runs differ from one process by 16-bit rounding of gradients summed over other
// row subsets, which Adam turns into weight differences growing like lr x steps / |w|; at
// 1e-3 the smallest weights (the residual projections) reach the 1e-2 bound after 12 steps at
// some world sizes even at stage 0. A real defect (a missing shard, a wrong average) shows as O(1).
std::string config_text(int stage, int gas, bool bf16, const std::string& zero_extra = "") {
  return detail::concat(R"({"train_batch_size": )", kGlobalBatch, R"(, "gradient_accumulation_steps": )", gas,
                        R"(, "optimizer": {"type": "AdamW", "params": {"lr": 5e-4, "weight_decay": 0.1}},
      "gradient_clipping": 1.0, "seed": 7, "bf16": {"enabled": )", bf16 ? "true" : "false",
                        R"(}, "zero_optimization": {"stage": )", stage, zero_extra, "}}");
}
}  // namespace

TEST_CASE("ZeRO stages 0-2 x f32/bf16 x accumulation 1/2 match one process at stage 0", "[zero]") {
  const auto& world = runtime().world_ptr();
  for (bool bf16 : {false, true}) {
    const TrainingRun alone = train_tiny_gpt(config_text(0, 1, bf16), nullptr, kSteps);
    for (int stage : {0, 1, 2})
      for (int gas : {1, 2}) {
        INFO((bf16 ? "bf16" : "f32") << ", stage " << stage << ", gradient_accumulation_steps " << gas << ", "
                                     << world->size() << " ranks");
        const TrainingRun parallel = train_tiny_gpt(config_text(stage, gas, bf16), world, kSteps);
        require_equivalent(alone, parallel, bf16 ? 1e-2 : 1e-5);
        if (stage == 1) CHECK(parallel.collectives_outside_boundaries == 0);  // stage 1 reduces once per cycle
      }
  }
}

TEST_CASE("ZeRO-2 with small buckets, overlapped or not, matches one process", "[zero]") {
  const auto& world = runtime().world_ptr();
  const TrainingRun alone = train_tiny_gpt(config_text(0, 1, false), nullptr, kSteps);
  for (const char* overlap : {"true", "false"}) {
    INFO("overlap_comm " << overlap);
    const std::string buckets = detail::concat(R"(, "reduce_bucket_size": 3000, "allgather_bucket_size": 2000,
        "overlap_comm": )", overlap);
    require_equivalent(alone, train_tiny_gpt(config_text(2, 2, false, buckets), world, kSteps), 1e-5);
  }
}

namespace {
// Two parameters; with N ranks the flat buffer of 2·N·4 elements puts `a` in the first ranks'
// shards and `b` in the last ranks'.
struct TwoVectors : nn::Module {
  autograd::Variable a, b;
  explicit TwoVectors(int64_t n) {
    a = register_parameter("a", Tensor::full({n}, 0.5));
    b = register_parameter("b", Tensor::full({n}, 0.25));
  }
  // input [2, n], a constant: row 0 multiplies a, row 1 multiplies b.
  autograd::Variable forward(const autograd::Variable& x) override {
    const autograd::Variable row_a(x.data().select(0, 0).contiguous()), row_b(x.data().select(0, 1).contiguous());
    return autograd::add(autograd::sum(autograd::mul(a, row_a)), autograd::sum(autograd::mul(b, row_b)));
  }
};
}  // namespace

TEST_CASE("fp16 ZeRO-2: an overflow in one rank's shard skips the step on every rank", "[zero]") {
  const auto& world = runtime().world_ptr();
  const int n = world->size();
  auto model = std::make_shared<TwoVectors>(4 * n);
  const Config config = Config::from_string(detail::concat(R"({"train_batch_size": )", n, R"(,
      "fp16": {"enabled": true, "initial_scale_power": 4},
      "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_optimization": {"stage": 2}})"));
  Initialized init = initialize(config, model, nullptr, nullptr, world);
  // Rank 0's gradient of b overflows fp16 (a huge input times the loss scale); the averaged b
  // lands in the last rank's shard only, and a's shards stay finite.
  const double b_input = world->rank() == 0 ? 60000.0 : 1.0;
  const Tensor input = Tensor::ones({1, 4 * n});
  const Tensor inputs = cat({input, Tensor::full({1, 4 * n}, b_input)}, 0).to(DType::F16);
  init.engine->backward((*init.engine)(autograd::Variable(inputs)));
  init.engine->step();
  CHECK(init.engine->skipped_steps() == 1);
  CHECK(init.engine->last_report().skipped);
  for (float v : model->a.data().to(DType::F32).to_vector<float>()) CHECK(v == 0.5f);  // untouched everywhere
  // The next, finite step runs on every rank, and every rank holds the same parameters.
  const Tensor finite = cat({input, input}, 0).to(DType::F16);
  init.engine->backward((*init.engine)(autograd::Variable(finite)));
  init.engine->step();
  CHECK(init.engine->skipped_steps() == 1);
  Tensor gathered = Tensor::zeros({n * 4 * n}, DType::F16);
  world->all_gather(model->a.data().contiguous().view({4 * n}), gathered);
  const std::vector<float> all = gathered.to(DType::F32).to_vector<float>();
  for (float v : all) CHECK(v == all[0]);
  CHECK(all[0] < 0.5f);  // SGD moved a
}

TEST_CASE("ZeRO-3 x f32/bf16 x accumulation 1/2 x activation checkpointing matches one process at stage 0",
          "[zero]") {
  const auto& world = runtime().world_ptr();
  // Persistence threshold 0: every tensor is really sharded.
  const std::string stage3 = R"(, "stage3_param_persistence_threshold": 0)";
  for (bool bf16 : {false, true}) {
    const TrainingRun alone = train_tiny_gpt(config_text(0, 1, bf16), nullptr, kSteps);
    for (int gas : {1, 2})
      for (bool checkpointing : {false, true}) {
        INFO((bf16 ? "bf16" : "f32") << ", gradient_accumulation_steps " << gas << ", activation checkpointing "
                                     << checkpointing << ", " << world->size() << " ranks");
        const TrainingRun parallel =
            train_tiny_gpt(config_text(3, gas, bf16, stage3), world, kSteps, checkpointing);
        fathom::testing::require_stage3_partitioned(*parallel.engine);
        require_equivalent(alone, parallel, bf16 ? 1e-2 : 1e-5);
      }
  }
}

// Without dropout each checkpointed block ends in a linear layer: backward reaches that layer's
// own gather before anything asks for the block's recomputation, so the recomputed forward runs
// while its parameters are gathered for backward — it must leave them gathered (it once released
// them: "gradient of "weight" has shape [30, 120] but the parameter has shape [0]").
TEST_CASE("ZeRO-3 x activation checkpointing without dropout matches one process (f32, bf16, offload)", "[zero]") {
  const auto& world = runtime().world_ptr();
  const std::string stage3 = R"(, "stage3_param_persistence_threshold": 0)";
  const std::string offload =
      R"(, "stage3_param_persistence_threshold": 0, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"})";
  for (bool bf16 : {false, true}) {
    const TrainingRun alone = train_tiny_gpt(config_text(0, 1, bf16), nullptr, kSteps, false, kCPU, /*dropout=*/0.0);
    for (const std::string& extra : {stage3, offload}) {
      INFO((bf16 ? "bf16" : "f32") << (extra == offload ? ", offload cpu" : "") << ", " << world->size() << " ranks");
      const TrainingRun parallel =
          train_tiny_gpt(config_text(3, 1, bf16, extra), world, kSteps, /*activation_checkpointing=*/true, kCPU, 0.0);
      fathom::testing::require_stage3_partitioned(*parallel.engine);
      require_equivalent(alone, parallel, bf16 ? 1e-2 : 1e-5);
    }
  }
}

TEST_CASE("ZeRO-3: shards only between steps, gathered elements bounded, prefetch ahead of compute", "[zero]") {
  const auto& world = runtime().world_ptr();
  // Cap live parameters low enough to bind: gathered elements may exceed it by one module only.
  const int64_t max_live = 4000;
  const std::string stage3 = detail::concat(R"(, "stage3_param_persistence_threshold": 0,
      "stage3_prefetch_bucket_size": 3000, "stage3_max_live_parameters": )", max_live);
  const TrainingRun run = train_tiny_gpt(config_text(3, 1, false, stage3), world, 3);
  fathom::testing::require_stage3_partitioned(*run.engine);
  const zero::ParameterGatherer* gatherer = zero::as_sharded(run.engine->training_state())->gatherer();
  REQUIRE(gatherer != nullptr);
  CHECK(gatherer->gathered_elements() == 0);  // after the step and the comparison's release
  int64_t largest_parameter = 0;
  for (const auto& [name, w] : run.weights) largest_parameter = std::max(largest_parameter, w.numel());
  // One module's own parameters at most: a linear's weight (GPT's largest tensor, the tied
  // embedding, is used by two modules but is one parameter).
  CHECK(run.zero3_peak_gathered > 0);
  CHECK(run.zero3_peak_gathered <= max_live + 2 * largest_parameter);
  // Prefetch: in the last step some module's gather was issued while an earlier module was still
  // in its forward (between its start and end events).
  using Event = zero::ParameterGatherer::Event;
  bool prefetched_during_compute = false;
  std::vector<int> running;
  for (const Event& e : gatherer->events()) {
    if (e.kind == Event::ModuleForwardStarted) running.push_back(e.module);
    if (e.kind == Event::ModuleForwardEnded && !running.empty()) running.pop_back();
    if (e.kind == Event::PrefetchIssued && !running.empty() && e.module != running.back())
      prefetched_during_compute = true;
  }
  CHECK(prefetched_during_compute);
}

namespace {
// One Linear called twice per forward (its parameters gathered, released and gathered again).
struct TwiceLinear : nn::Module {
  std::shared_ptr<nn::Linear> linear;
  TwiceLinear() {
    linear = register_module("linear", std::make_shared<nn::Linear>(12, 12));
    std::vector<float> w(144);  // the same start on every construction (Linear's init draws anew)
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.3f * std::sin(0.7f * i);
    linear->weight.data().copy_(Tensor::from_vector(w, {12, 12}));
    linear->bias.data().zero_();
  }
  autograd::Variable forward(const autograd::Variable& x) override {
    return (*linear)(autograd::tanh((*linear)(x)));
  }
};

std::vector<float> train_twice_linear(const std::string& zero, std::shared_ptr<parallel::Communicator> group,
                                      int64_t* gathers = nullptr) {
  auto model = std::make_shared<TwiceLinear>();
  const int n = group ? group->size() : 1;
  const Config config = Config::from_string(detail::concat(R"({"train_batch_size": 4,
      "optimizer": {"type": "SGD", "params": {"lr": 0.05}}, "zero_optimization": )", zero, "}"));
  Initialized init = initialize(config, model, nullptr, nullptr, group);
  const int rank = group ? group->rank() : 0;
  for (int step = 0; step < 5; ++step) {
    // Global batch of 4 rows; this rank takes rows [rank * 4/n, (rank+1) * 4/n).
    std::vector<float> x, y;
    for (int row = rank * 4 / n; row < (rank + 1) * 4 / n; ++row)
      for (int j = 0; j < 12; ++j) x.push_back(std::sin(step + row * 12 + j)), y.push_back(std::cos(row + j));
    const int64_t rows = 4 / n;
    const autograd::Variable out = (*init.engine)(autograd::Variable(Tensor::from_vector(x, {rows, 12})));
    const autograd::Variable diff = autograd::sub(out, autograd::Variable(Tensor::from_vector(y, {rows, 12})));
    init.engine->backward(autograd::div(autograd::sum(autograd::mul(diff, diff)), 4.0 * 12 / n));
    init.engine->step();
  }
  if (zero.find(R"("stage": 3)") != std::string::npos) fathom::testing::require_stage3_partitioned(*init.engine);
  if (const zero::ShardedState* z = zero::as_sharded(init.engine->training_state()); gathers && z && z->gatherer())
    *gathers = z->gatherer()->gathers_issued();
  for (const auto& [name, tensor] : init.engine->consolidated_state_dict())
    if (name == "linear.weight") return tensor.to_vector<float>();
  FATHOM_FAIL("no linear.weight");
}
}  // namespace

TEST_CASE("ZeRO-3 with a module called twice per forward matches one process", "[zero]") {
  const auto& world = runtime().world_ptr();
  if (4 % world->size() != 0) return;  // the hand-made batch splits over 1, 2 or 4 ranks
  const std::vector<float> alone = train_twice_linear(R"({"stage": 0})", nullptr);
  const auto as_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  int64_t gathers_kept = 0, gathers_released = 0;
  // Default stage3_max_reuse_distance: the second call finds the parameters still gathered.
  const std::vector<float> kept =
      train_twice_linear(R"({"stage": 3, "stage3_param_persistence_threshold": 0})", world, &gathers_kept);
  // Distance 0: released after the first call and gathered again for the second.
  const std::vector<float> released = train_twice_linear(
      R"({"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0})", world,
      &gathers_released);
  REQUIRE(fathom::testing::mismatch(as_double(kept), as_double(alone), 1e-6, 1e-5) == "");
  REQUIRE(fathom::testing::mismatch(as_double(released), as_double(alone), 1e-6, 1e-5) == "");
  REQUIRE(alone != std::vector<float>(alone.size(), alone[0]));
  // After the first (recording) step, one gather a step fewer: at distance 0 the weight, which the
  // second call gathers first, is still kept (reused after 0 other elements); the bias, reused
  // only after the weight's 144 elements, is released and gathered again.
  CHECK(gathers_released - gathers_kept == 4);

  // Parameter offload to nvme (tiny buffers): the module's pieces come from swap files, for both
  // calls; the same values as stage 3 without it, bit for bit.
  const std::string swap = (std::filesystem::current_path() / "zero-twice-swap").string();
  if (world->rank() == 0) std::filesystem::create_directories(swap);
  world->barrier();
  const std::vector<float> swapped = train_twice_linear(
      R"({"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0, "offload_param":
      {"device": "nvme", "nvme_path": ")" + swap + R"(", "buffer_count": 2, "buffer_size": 200, "max_in_cpu": 300}})",
      world);
  CHECK(swapped == released);
  // Room for the weight (144 elements) but not for the module, whose weight and bias (156) are
  // gathered together (one rank: its shard is the whole model).
  if (world->size() == 1)
    CHECK_THROWS_WITH(train_twice_linear(R"({"stage": 3, "stage3_param_persistence_threshold": 0, "offload_param":
        {"device": "nvme", "nvme_path": ")" + swap + R"(", "max_in_cpu": 150}})", world),
                      Catch::Contains("offload_param.max_in_cpu: 150 elements cannot hold module \"linear\"'s part") &&
                          Catch::Contains("set max_in_cpu to 156"));
  world->barrier();
  if (world->rank() == 0) std::filesystem::remove_all(swap);
}
