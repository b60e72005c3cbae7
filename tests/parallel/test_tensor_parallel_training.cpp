// Training GPT with tensor parallelism through the engine computes what one process computes:
// tensor 2 x data 1 at 2 ranks, tensor 2 x data 2 at 4 (ZeRO stages 0-3 over the data axis),
// dropout on, gradient clipping by the job-wide norm, AdamW — every step's loss and every final
// weight (gathered whole against the one-process model's) within f32 1e-5; and a checkpoint of
// one layout resumed at others continues that same run.
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/initialize.h"
#include "models/gpt.h"
#include "models/gpt_tensor_parallel.h"
#include "mpi_test_util.h"
#include "nn/dropout.h"
#include "nn/loss.h"
#include "parallel/tensor_parallel_regions.h"
#include "parallel/vocab_parallel_cross_entropy.h"
#include "test_util.h"

using namespace fathom;
using fathom::testing::mismatch;
using fathom::testing::runtime;

namespace {

constexpr int kTensor = 2, kSteps = 3, kRows = 4, kLength = 8;

models::GPTConfig tiny_config() {
  models::GPTConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 16;
  c.vocab_size = 300;  // padded to 512: 256 real rows on tensor rank 0, 44 on rank 1
  c.block_size = 16;
  c.dropout = 0.1;
  return c;
}

// Step s's global batch: kRows rows of token ids and their next tokens.
struct GlobalBatch {
  Tensor inputs, targets, sample_index;
};
GlobalBatch global_batch(int step) {
  std::vector<int64_t> ids(kRows * kLength), next(kRows * kLength), index(kRows);
  for (int64_t i = 0; i < kRows * kLength; ++i) ids[i] = (i * 131 + step * 17 + 5) % 300;
  for (int64_t i = 0; i < kRows * kLength; ++i) next[i] = (ids[i] * 7 + 1) % 300;
  for (int64_t r = 0; r < kRows; ++r) index[r] = step * kRows + r;
  return {Tensor::from_vector(ids, {kRows, kLength}), Tensor::from_vector(next, {kRows, kLength}),
          Tensor::from_vector(index, {kRows})};
}

std::string config_json(int data_size, int stage, int tensor_size = 1) {
  return detail::concat(R"({"train_batch_size": )", kRows, R"(, "train_micro_batch_size_per_gpu": )", kRows / data_size,
                        R"(, "tensor_parallel": {"autotp_size": )", tensor_size,
                        R"(}, "gradient_clipping": 0.5, "zero_optimization": {"stage": )", stage,
                        R"(}, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}}})");
}

struct Reference {
  std::vector<double> losses;
  std::shared_ptr<models::GPT> model;
};
// One process, the whole batch per step.
Reference train_alone() {
  auto model = std::make_shared<models::GPT>(tiny_config(), /*seed=*/3);
  Initialized init = initialize(Config::from_string(config_json(1, 0)), model);
  Reference ref{{}, model};
  for (int s = 0; s < kSteps; ++s) {
    const GlobalBatch b = global_batch(s);
    Engine& engine = *init.engine;
    engine.backward(nn::cross_entropy(engine(autograd::Variable(b.inputs), b.sample_index), b.targets));
    engine.step();
    ref.losses.push_back(engine.last_report().loss);
  }
  return ref;
}

Tensor rows_of(const Tensor& t, int64_t offset, int64_t length) { return t.narrow(0, offset, length).contiguous(); }

}  // namespace

TEST_CASE("tensor parallel training: every step's loss and every final weight equal one process's", "[parallel]") {
  if (runtime().size() % kTensor != 0) return;
  const Reference ref = train_alone();
  const auto groups = runtime().groups(/*pipeline=*/1, /*tensor=*/kTensor);
  const int data_size = groups.data().size(), data_rank = groups.coord().data;
  const std::vector<int> stages = data_size > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0};
  for (int stage : stages) {
    INFO("ZeRO stage " << stage << ", data " << data_size);
    auto model = std::make_shared<models::TensorParallelGPT>(tiny_config(), groups.tensor_ptr());
    model->load_full(models::GPT(tiny_config(), /*seed=*/3));
    Initialized init = initialize(Config::from_string(config_json(data_size, stage, kTensor)), model, nullptr, nullptr,
                                  groups);
    Engine& engine = *init.engine;
    const parallel::VocabParallelEmbedding& wte = *model->transformer->wte;
    for (int s = 0; s < kSteps; ++s) {
      const GlobalBatch b = global_batch(s);
      const int64_t rows = kRows / data_size, first = data_rank * rows;
      const autograd::Variable logits =
          engine(autograd::Variable(rows_of(b.inputs, first, rows)), rows_of(b.sample_index, first, rows));
      engine.backward(parallel::vocab_parallel_cross_entropy(
          logits, rows_of(b.targets, first, rows), {wte.local.offset, wte.local_real_rows}, groups.tensor_ptr()));
      engine.step();
      CHECK(std::fabs(engine.last_report().loss - ref.losses[s]) <= 1e-5);
    }
    // The final weights, gathered whole (shards over tensor, unpadded) against the one-process model's.
    const nn::NamedTensors trained = engine.consolidated_state_dict();
    for (const auto& [name, expected] : ref.model->named_parameters()) {
      INFO(name);
      if (name == "lm_head.weight") continue;  // tied: transformer.wte.weight
      const Tensor* mine = nullptr;
      for (const auto& [n, t] : trained)
        if (n == name) mine = &t;
      REQUIRE(mine != nullptr);
      CHECK(mismatch(*mine, expected.data().contiguous(), 1e-5, 1e-5) == "");
    }
  }
}

namespace {

// Steps [from, to) of the one-process run at `tensor` x (world / tensor) ranks and ZeRO `stage`
// over the ranks of `world`: loaded from `load_dir` first when given, saved to `save_dir` at the
// end when given. Returns each step's loss and the final weights, whole.
struct Span {
  std::vector<double> losses;
  nn::NamedTensors weights;
};
Span train_span(const std::shared_ptr<parallel::Communicator>& world, int tensor, int stage, int from, int to,
                const std::string& load_dir, const std::string& save_dir) {
  const parallel::ProcessGroups groups(world, parallel::Topology(world->size(), 1, tensor));
  const int data_size = groups.data().size(), data_rank = groups.coord().data;
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<models::TensorParallelGPT> split;
  if (tensor == 1) {
    model = std::make_shared<models::GPT>(tiny_config(), /*seed=*/3);
  } else {
    split = std::make_shared<models::TensorParallelGPT>(tiny_config(), groups.tensor_ptr());
    split->load_full(models::GPT(tiny_config(), /*seed=*/3));
    model = split;
  }
  Initialized init =
      initialize(Config::from_string(config_json(data_size, stage, tensor)), model, nullptr, nullptr, groups);
  Engine& engine = *init.engine;
  if (!load_dir.empty()) engine.load_checkpoint(load_dir);
  Span span;
  for (int s = from; s < to; ++s) {
    const GlobalBatch b = global_batch(s);
    const int64_t rows = kRows / data_size, first = data_rank * rows;
    const autograd::Variable logits =
        engine(autograd::Variable(rows_of(b.inputs, first, rows)), rows_of(b.sample_index, first, rows));
    const Tensor targets = rows_of(b.targets, first, rows);
    engine.backward(split ? split->loss_of_logits(logits, targets) : nn::cross_entropy(logits, targets));
    engine.step();
    span.losses.push_back(engine.last_report().loss);
  }
  if (!save_dir.empty()) engine.save_checkpoint(save_dir);
  span.weights = engine.consolidated_state_dict();
  return span;
}

void check_weights(const nn::NamedTensors& trained, const models::GPT& expected) {
  for (const auto& [name, param] : expected.named_parameters()) {
    INFO(name);
    if (name == "lm_head.weight") continue;  // tied: transformer.wte.weight
    const Tensor* mine = nullptr;
    for (const auto& [n, t] : trained)
      if (n == name) mine = &t;
    REQUIRE(mine != nullptr);
    CHECK(mismatch(*mine, param.data().contiguous(), 1e-5, 1e-5) == "");
  }
}

}  // namespace

TEST_CASE("a tensor-parallel checkpoint resumes at other tensor, data and ZeRO layouts on the same run",
          "[parallel][checkpoint]") {
  const int world = runtime().size();
  if (world != 2 && world != 4) return;
  const Reference ref = train_alone();
  // Saved by (tensor 2, data 1, ZeRO 2) after two steps: every pair of ranks is such a job.
  const int pair = runtime().rank() / 2;
  const auto pair_world = runtime().world_ptr()->split(pair, runtime().rank(), "pair");
  const std::string root = "/tmp/fathom_tp_resume_np" + std::to_string(world);
  const std::string saved = root + "/pair" + std::to_string(pair);
  if (runtime().rank() == 0) std::filesystem::remove_all(root);
  runtime().world_ptr()->barrier();
  const Span first = train_span(pair_world, /*tensor=*/2, /*stage=*/2, 0, 2, "", saved);
  for (int s = 0; s < 2; ++s) CHECK(std::fabs(first.losses[s] - ref.losses[s]) <= 1e-5);
  runtime().world_ptr()->barrier();  // every pair's checkpoint is complete

  struct Resumed {
    const char* layout;
    int ranks, tensor, stage;
  };
  for (const Resumed& at : {Resumed{"tensor 1 x data 2, ZeRO 3", 2, 1, 3}, Resumed{"one process", 1, 1, 0},
                            Resumed{"tensor 4 x data 1, ZeRO 0", 4, 4, 0}}) {
    if (at.ranks > world) continue;
    INFO("resumed at " << at.layout);
    // The job of the first at.ranks ranks (every rank alone for one process) resumes pair 0's checkpoint.
    const int color = at.ranks == 1 ? runtime().rank() : runtime().rank() < at.ranks ? 0 : 1;
    const auto job = runtime().world_ptr()->split(color, runtime().rank(), at.layout);
    if (color == 0 || at.ranks == 1) {
      const Span resumed = train_span(job, at.tensor, at.stage, 2, kSteps, root + "/pair0", "");
      CHECK(std::fabs(resumed.losses[0] - ref.losses[2]) <= 1e-5);
      check_weights(resumed.weights, *ref.model);
    }
    runtime().world_ptr()->barrier();
  }
}
