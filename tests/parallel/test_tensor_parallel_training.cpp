// Training GPT with tensor parallelism through the engine computes what one process computes.
// One matrix, every axis tested where it is larger than 1: tensor 2 x data 1 at 2 ranks; at 4,
// tensor 2 x data 2 under ZeRO stages 0-3 and tensor 4 x data 1; sequence parallelism on and
// off; f32, bf16 and fp16 (dynamic loss scaling); gradient
// accumulation 1 and 2; dropout on, gradient clipping by the job-wide norm, AdamW (f32) and SGD
// with momentum (16-bit), a vocabulary
// (301) that no tensor-parallel size divides. Every step's loss and every final weight (gathered
// whole) against the one-process run of the same precision and accumulation: f32 within 1e-5,
// 16-bit within 1e-2. And a checkpoint of one layout resumed at others continues that same run.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/memory_stats.h"
#include "engine/initialize.h"
#include "models/gpt.h"
#include "models/gpt_tensor_parallel.h"
#include "mpi_test_util.h"
#include "nn/loss.h"
#include "parallel/local_communicator.h"
#include "parallel/partitioned_checkpoint.h"
#include "test_util.h"
#include "token_batches.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::mismatch;
using fathom::testing::runtime;

namespace {

constexpr int kSteps = 3, kRows = 4, kLength = 8, kVocab = 301;

models::GPTConfig tiny_config(DType dtype) {
  models::GPTConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 16;
  c.vocab_size = kVocab;  // padded to 512: at tp 2, 256 real rows on rank 0 and 45 on rank 1
  c.block_size = 16;
  c.dropout = 0.1;
  c.dtype = dtype;
  return c;
}

// Step s's global batch: kRows rows of token ids and their next tokens.
using fathom::testing::GlobalBatch;
GlobalBatch global_batch(int step) { return fathom::testing::token_batch(step, kRows, kLength, kVocab); }

Tensor rows_of(const Tensor& t, int64_t offset, int64_t length) { return t.narrow(0, offset, length).contiguous(); }

// One layout of the matrix.
struct Case {
  int tensor = 1, stage = 0;
  DType precision = DType::F32;
  int accumulation = 1;
  bool sequence_parallel = false;
  bool partitioned_checkpoints = false;  // every block checkpointed, its input stored split over tp
  std::string str() const {
    return detail::concat("tensor ", tensor, sequence_parallel ? " (sequence parallel)" : "",
                          partitioned_checkpoints ? " (partitioned activation checkpoints)" : "", ", ZeRO ", stage,
                          ", ", dtype_name(precision), ", accumulation ", accumulation);
  }
};

// AdamW in f32. In 16 bits, SGD with momentum: Adam's normalised update turns the rounding
// noise of near-zero gradients into whole ±lr steps, so two correct 16-bit runs would differ by
// 2 lr per step; SGD's update keeps the gradients' own (small) difference.
constexpr const char* kOptimizer = R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}})";
constexpr const char* kHalfOptimizer = R"({"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}})";

std::string config_json(int data_size, const Case& c) {
  return detail::concat(R"({"train_batch_size": )", kRows, R"(, "gradient_accumulation_steps": )", c.accumulation,
                        R"(, "tensor_parallel": {"autotp_size": )", c.tensor, R"(}, "bf16": {"enabled": )",
                        c.precision == DType::BF16 ? "true" : "false", R"(}, "fp16": {"enabled": )",
                        c.precision == DType::F16 ? "true" : "false",
                        R"(, "initial_scale_power": 8}, "gradient_clipping": 0.5, "zero_optimization": {"stage": )",
                        c.stage, c.stage == 3 ? R"(, "stage3_param_persistence_threshold": 0)" : "",
                        R"(}, "optimizer": )", c.precision == DType::F32 ? kOptimizer : kHalfOptimizer, "}");
}

// Steps [from, to) of the run at `c` over the ranks of `world` (data-parallel size world /
// tensor): loaded from `load_dir` first when given, saved to `save_dir` at the end when given.
// Returns each step's loss and the final weights, whole.
struct Span {
  std::vector<double> losses;
  nn::NamedTensors weights;
};
Span train_span(const std::shared_ptr<parallel::Communicator>& world, const Case& c, int from, int to,
                const std::string& load_dir = "", const std::string& save_dir = "") {
  const parallel::ProcessGroups groups(world, parallel::Topology(world->size(), 1, c.tensor));
  const int data_size = groups.data().size(), data_rank = groups.coord().data;
  std::shared_ptr<nn::Module> model = std::make_shared<models::GPT>(tiny_config(c.precision), /*seed=*/3);
  std::shared_ptr<models::TensorParallelGPT> split;
  if (c.tensor > 1) {
    split = std::make_shared<models::TensorParallelGPT>(tiny_config(c.precision), groups.tensor_ptr(),
                                                        models::TensorParallelGPTOptions{.sequence_parallel = c.sequence_parallel});
    split->load_full(static_cast<const models::GPT&>(*model));
    if (c.partitioned_checkpoints)
      split->set_checkpointing(parallel::partition_checkpoint_inputs(
          nn::checkpoint_layers_of_type(*split, "TransformerBlock"), groups.tensor_ptr()));
    model = split;
  }
  Initialized init = initialize(Config::from_string(config_json(data_size, c)), model, nullptr, nullptr, groups);
  Engine& engine = *init.engine;
  if (!load_dir.empty()) engine.load_checkpoint(load_dir);
  Span span;
  const int64_t rank_rows = kRows / data_size, micro_rows = rank_rows / c.accumulation;
  for (int s = from; s < to; ++s) {
    const GlobalBatch b = global_batch(s);
    for (int m = 0; m < c.accumulation; ++m) {
      const int64_t first = data_rank * rank_rows + m * micro_rows;
      const autograd::Variable logits =
          engine(autograd::Variable(rows_of(b.inputs, first, micro_rows)), rows_of(b.sample_index, first, micro_rows));
      const Tensor targets = rows_of(b.targets, first, micro_rows);
      engine.backward(split ? split->loss_of_logits(logits, targets) : nn::cross_entropy(logits, targets));
      engine.step();
    }
    span.losses.push_back(engine.last_report().loss);
  }
  // Stage 3 with persistence threshold 0 (config_json): every parameter is partitioned.
  if (c.stage == 3) fathom::testing::require_stage3_partitioned(engine);
  if (!save_dir.empty()) engine.save_checkpoint(save_dir);
  span.weights = engine.consolidated_state_dict();
  return span;
}

// The one-process run of the same precision and accumulation (every rank trains it alone).
const Span& one_process(DType precision, int accumulation) {
  static std::map<std::pair<DType, int>, Span> runs;
  const auto key = std::make_pair(precision, accumulation);
  if (!runs.count(key))
    runs[key] =
        train_span(std::make_shared<parallel::LocalCommunicator>(),
                   Case{.tensor = 1, .stage = 0, .precision = precision, .accumulation = accumulation}, 0, kSteps);
  return runs.at(key);
}

void check_same_run(const Span& run, const Span& expected, size_t first_step, double tolerance) {
  for (size_t s = 0; s < run.losses.size(); ++s) {
    INFO("step " << first_step + s);
    CHECK(std::fabs(run.losses[s] - expected.losses[first_step + s]) <= tolerance);
  }
  for (const auto& [name, want] : expected.weights) {
    INFO(name);
    if (name == "lm_head.weight") continue;  // tied: transformer.wte.weight
    const Tensor* mine = nullptr;
    for (const auto& [n, t] : run.weights)
      if (n == name) mine = &t;
    REQUIRE(mine != nullptr);
    CHECK(mismatch(mine->to(DType::F32), want.to(DType::F32), tolerance, tolerance) == "");
  }
}

}  // namespace

TEST_CASE("tensor parallel training: every step's loss and every final weight equal one process's", "[parallel]") {
  const int world = runtime().size();
  std::vector<Case> cases;
  if (world == 2)
    cases = {{.tensor = 2},
             {.tensor = 2, .accumulation = 2},
             {.tensor = 2, .precision = DType::BF16},
             {.tensor = 2, .sequence_parallel = true},
             {.tensor = 2, .precision = DType::BF16, .accumulation = 2, .sequence_parallel = true},
             {.tensor = 2, .accumulation = 2, .partitioned_checkpoints = true},
             {.tensor = 2, .precision = DType::F16, .accumulation = 2}};
  if (world == 4)
    cases = {{.tensor = 2, .stage = 0},
             {.tensor = 2, .stage = 1},
             {.tensor = 2, .stage = 2},
             {.tensor = 2, .stage = 3},
             {.tensor = 2, .stage = 2, .accumulation = 2},
             {.tensor = 2, .stage = 3, .precision = DType::BF16, .accumulation = 2},
             {.tensor = 2, .stage = 1, .sequence_parallel = true},
             {.tensor = 2, .stage = 3, .accumulation = 2, .sequence_parallel = true},
             {.tensor = 4},
             {.tensor = 4, .precision = DType::BF16, .accumulation = 2},
             {.tensor = 4, .sequence_parallel = true},
             {.tensor = 2, .stage = 2, .partitioned_checkpoints = true},
             {.tensor = 4, .partitioned_checkpoints = true},
             {.tensor = 2, .stage = 2, .precision = DType::F16, .sequence_parallel = true}};
  for (const Case& c : cases) {
    INFO(c.str() << " at " << world << " ranks");
    check_same_run(train_span(runtime().world_ptr(), c, 0, kSteps), one_process(c.precision, c.accumulation), 0,
                   c.precision == DType::F32 ? 1e-5 : 1e-2);
  }
}

TEST_CASE("a tensor-parallel checkpoint resumes at other tensor, data and ZeRO layouts on the same run",
          "[parallel][checkpoint]") {
  const int world = runtime().size();
  if (world != 2 && world != 4) return;
  const Span& uninterrupted = one_process(DType::F32, 1);
  // Saved by (tensor 2, data 1, ZeRO 2) after two steps: every pair of ranks is such a job.
  const int pair = runtime().rank() / 2;
  const auto pair_world = runtime().world_ptr()->split(pair, runtime().rank(), "pair");
  const std::string root = "/tmp/fathom_tp_resume_np" + std::to_string(world);
  const std::string saved = root + "/pair" + std::to_string(pair);
  if (runtime().rank() == 0) std::filesystem::remove_all(root);
  runtime().world_ptr()->barrier();
  const Span first = train_span(pair_world, {.tensor = 2, .stage = 2}, 0, 2, "", saved);
  for (int s = 0; s < 2; ++s) CHECK(std::fabs(first.losses[s] - uninterrupted.losses[s]) <= 1e-5);
  runtime().world_ptr()->barrier();  // every pair's checkpoint is complete

  struct Resumed {
    const char* layout;
    int ranks;
    Case at;
  };
  for (const Resumed& r : {Resumed{"tensor 1 x data 2, ZeRO 3", 2, {.tensor = 1, .stage = 3}},
                           Resumed{"one process", 1, {.tensor = 1, .stage = 0}},
                           Resumed{"tensor 4 x data 1, ZeRO 0", 4, {.tensor = 4, .stage = 0}}}) {
    if (r.ranks > world) continue;
    INFO("resumed at " << r.layout);
    // The job of the first r.ranks ranks (every rank alone for one process) resumes pair 0's checkpoint.
    const int color = r.ranks == 1 ? runtime().rank() : runtime().rank() < r.ranks ? 0 : 1;
    const auto job = runtime().world_ptr()->split(color, runtime().rank(), r.layout);
    if (color == 0 || r.ranks == 1)
      check_same_run(train_span(job, r.at, 2, kSteps, root + "/pair0"), uninterrupted, 2, 1e-5);
    runtime().world_ptr()->barrier();
  }
  // Another model (wider) refuses the checkpoint by name, on every rank of the job, at any size.
  const parallel::ProcessGroups groups(pair_world, parallel::Topology(2, 1, 2));
  models::GPTConfig wider = tiny_config(DType::F32);
  wider.n_embd = 32;
  auto model = std::make_shared<models::TensorParallelGPT>(wider, groups.tensor_ptr());
  Initialized init = initialize(Config::from_string(config_json(1, {.tensor = 2})), model, nullptr, nullptr, groups);
  CHECK_THAT(fathom::testing::error_of([&] { init.engine->load_checkpoint(saved); }),
             Catch::Contains("tensor 0 is \"transformer.wte.weight\" [301, 16] but the model's is "
                             "\"transformer.wte.weight\" [301, 32]; it was saved from another model"));
}

TEST_CASE("debug mode: tensor-parallel ranks fed different batches stop with an error on every rank", "[parallel]") {
  if (runtime().size() != 2) return;
  ::setenv("FATHOM_COMM_DEBUG", "1", 1);
  const parallel::ProcessGroups groups(runtime().world_ptr(), parallel::Topology(2, 1, 2));
  auto model = std::make_shared<models::TensorParallelGPT>(tiny_config(DType::F32), groups.tensor_ptr());
  Initialized init = initialize(Config::from_string(config_json(1, {.tensor = 2})), model, nullptr, nullptr, groups);
  const GlobalBatch same = global_batch(0), mine = global_batch(runtime().rank());
  CHECK(fathom::testing::error_of([&] { (*init.engine)(autograd::Variable(same.inputs), same.sample_index); }) ==
        "(no error)");
  CHECK(fathom::testing::error_of([&] { (*init.engine)(autograd::Variable(mine.inputs), mine.sample_index); }) ==
        "engine forward (FATHOM_COMM_DEBUG): the ranks of this tensor-parallel group were given different batches; "
        "every rank of a tensor-parallel group must feed the same samples (the data loader of fathom::initialize "
        "does: it splits the batch over the data-parallel ranks only)");
  ::unsetenv("FATHOM_COMM_DEBUG");
}

namespace {
int64_t tagged_bytes(MemoryTag tag) { return allocator_for(kCPU).stats().snapshot()[tag].current; }
}  // namespace

TEST_CASE("memory: a rank holds 1/tp of the split parameters, all of the replicated ones", "[parallel][memory]") {
  const int tp = runtime().size();
  models::GPTConfig config = tiny_config(DType::F32);
  config.n_layer = 3;
  config.n_embd = 64;
  const models::GPT full(config, /*seed=*/1);
  const int64_t before = tagged_bytes(MemoryTag::Parameters);
  const models::TensorParallelGPT split(config, runtime().world_ptr());
  const double measured = static_cast<double>(tagged_bytes(MemoryTag::Parameters) - before);
  double expected = 0;  // the unsplit model's bytes: split ones / tp (the padded vocabulary's), replicated whole
  for (const auto& [name, param] : full.named_parameters()) {
    if (name == "lm_head.weight") continue;  // tied to the embedding
    const nn::Placement p = split.placement(name);
    const double bytes = static_cast<double>(param.numel()) * 4;
    expected +=
        p.sharded() ? bytes * static_cast<double>(p.stored_size) / static_cast<double>(p.full_size) / tp : bytes;
  }
  INFO("measured " << measured << " bytes, expected " << expected << " at tensor " << tp);
  CHECK(std::fabs(measured - expected) <= 0.01 * expected);
}

TEST_CASE("memory: sequence parallelism keeps 1/tp of the layer norms' inputs", "[parallel][memory]") {
  const int tp = runtime().size();
  models::GPTConfig config = tiny_config(DType::F32);
  config.n_layer = 3;
  config.n_embd = 64;
  config.block_size = 32;
  const int64_t B = 4, T = 32, C = 64;
  std::vector<int64_t> ids(B * T);
  for (int64_t i = 0; i < B * T; ++i) ids[i] = (i * 131 + 7) % kVocab;
  const autograd::Variable idx(Tensor::from_vector(ids, {B, T}));
  // The activations the graph keeps after forward, on this rank.
  const auto retained = [&](bool sequence_parallel) {
    models::TensorParallelGPT model(config, runtime().world_ptr(), {.sequence_parallel = sequence_parallel});
    const int64_t before = tagged_bytes(MemoryTag::Activations);
    MemoryTagScope activations(MemoryTag::Activations);
    const autograd::Variable logits = model(idx);
    return static_cast<double>(tagged_bytes(MemoryTag::Activations) - before);
  };
  const double whole = retained(false), split = retained(true);
  // Each block's two layer norms and the final one keep their input: (B, T, C) without, (B, T/tp, C) with.
  const double layer_norm_inputs = static_cast<double>((2 * config.n_layer + 1) * B * T * C * 4);
  INFO("kept after forward: " << whole << " bytes without sequence parallelism, " << split << " with, at tensor "
                              << tp);
  CHECK(whole - split >= 0.9 * layer_norm_inputs * (1.0 - 1.0 / tp));
}
