// Training GPT with tensor parallelism through the engine computes what one process computes:
// tensor 2 x data 1 at 2 ranks, tensor 2 x data 2 at 4 (ZeRO stages 0-3 over the data axis),
// dropout on, gradient clipping by the job-wide norm, AdamW — every step's loss and every final
// weight (this rank's shard against the same slice of the one-process model's) within f32 1e-5.
#include <cmath>
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

std::string config_json(int data_size, int stage) {
  return detail::concat(R"({"train_batch_size": )", kRows, R"(, "train_micro_batch_size_per_gpu": )", kRows / data_size,
                        R"(, "gradient_clipping": 0.5, "zero_optimization": {"stage": )", stage,
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
  const int tensor_rank = groups.coord().tensor;
  const std::vector<int> stages = data_size > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0};
  for (int stage : stages) {
    INFO("ZeRO stage " << stage << ", data " << data_size);
    auto model = std::make_shared<models::TensorParallelGPT>(tiny_config(), groups.tensor_ptr());
    model->load_full(models::GPT(tiny_config(), /*seed=*/3));
    Initialized init = initialize(Config::from_string(config_json(data_size, stage)), model, nullptr, nullptr, groups);
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
    // The final weights: this rank's shard of each against the one-process model's same slice.
    const nn::NamedTensors trained = engine.consolidated_state_dict();  // whole over data, shards over tensor
    for (const auto& [name, expected_param] : ref.model->named_parameters()) {
      INFO(name);
      if (name == "lm_head.weight") continue;  // tied: transformer.wte.weight
      const Tensor* mine = nullptr;
      for (const auto& [n, t] : trained)
        if (n == name) mine = &t;
      REQUIRE(mine != nullptr);
      const Tensor& expected = expected_param.data();
      const nn::Placement placement = model->placement(name);
      Tensor slice = expected;
      if (name == "transformer.wte.weight") {
        slice = expected.narrow(0, wte.local.offset, wte.local_real_rows);
        CHECK(mismatch(mine->narrow(0, wte.local_real_rows, wte.local.length - wte.local_real_rows),
                       Tensor::zeros({wte.local.length - wte.local_real_rows, 16}), 0, 0) == "");
        CHECK(mismatch(mine->narrow(0, 0, wte.local_real_rows).contiguous(), slice.contiguous(), 1e-5, 1e-5) == "");
        continue;
      }
      if (placement.sharded()) {
        const int64_t parts = placement.fused_parts, part = expected.size(placement.sharded_dim) / parts;
        const parallel::ShardRange range = parallel::shard_range(part, kTensor, tensor_rank);
        Shape shape = expected.sizes();
        shape[placement.sharded_dim] = parts * range.length;
        slice = Tensor::empty(shape, expected.dtype());
        for (int64_t p = 0; p < parts; ++p)
          slice.narrow(placement.sharded_dim, p * range.length, range.length)
              .copy_(expected.narrow(placement.sharded_dim, p * part + range.offset, range.length));
      }
      CHECK(mismatch(*mine, slice.contiguous(), 1e-5, 1e-5) == "");
    }
  }
}
