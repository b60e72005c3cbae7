// Tensor parallelism's building blocks over the world as the tensor-parallel group (run at 2 and
// 3 ranks, so shards are uneven where the sizes allow): each region op forward and backward
// against what it must compute from every rank's (deterministic) tensors, and the column- and
// row-parallel linear layers against nn::Linear, forward and backward, alone and as an MLP.
#include <cmath>
#include <memory>
#include <vector>

#include "autograd/functions.h"
#include "core/generator.h"
#include "kernels/elementwise.h"
#include "models/gpt.h"
#include "models/decoder.h"
#include "models/generation.h"
#include "models/gpt_tensor_parallel.h"
#include "models/gpt_weights.h"
#include "mpi_test_util.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "parallel/column_parallel_linear.h"
#include "parallel/row_parallel_linear.h"
#include "parallel/tensor_parallel_regions.h"
#include "parallel/tensor_parallel_transformer.h"
#include "parallel/vocab_parallel_cross_entropy.h"
#include "parallel/vocab_parallel_embedding.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::parallel;
using fathom::autograd::Variable;
using fathom::testing::error_of;
using fathom::testing::mismatch;
using fathom::testing::runtime;

namespace {

const Shape kShape{2, 5, 7};  // [B, T, C]: T and C split unevenly at 2 and 3 ranks

// A tensor every rank can compute for any rank: small multiples of 1/8, exact in f32 sums.
Tensor of_rank(int rank, const Shape& shape, int salt = 0) {
  std::vector<double> values(shape_numel(shape));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>((static_cast<int64_t>(i) * 5 + rank * 11 + salt * 3) % 17 - 8) / 8.0;
  return Tensor::from_vector(values, shape).to(DType::F32);
}

Tensor sum_over_ranks(int world, const Shape& shape, int salt) {
  Tensor total = Tensor::zeros(shape);
  for (int r = 0; r < world; ++r) total = add(total, of_rank(r, shape, salt));
  return total;
}

Tensor piece(const Tensor& whole, int64_t dim, int rank, int world) {
  const ShardRange range = shard_range(whole.size(dim), world, rank);
  return whole.narrow(dim, range.offset, range.length).contiguous();
}

Variable leaf(const Tensor& t) { return Variable(t.clone(), /*requires_grad=*/true); }

// 6 heads (3 a rank at 2 ranks, 2 at 3) and a vocabulary of 300, padded: 256 real rows on rank 0
// and 44 on rank 1 at tp 2; 128, 128 and 44 at 3.
models::GPTConfig small_gpt() {
  models::GPTConfig config;
  config.n_layer = 2;
  config.n_head = 6;
  config.n_embd = 24;
  config.vocab_size = 300;
  config.block_size = 16;
  return config;
}

}  // namespace

TEST_CASE("tensor parallel: shard_range splits sizes tp does not divide, the extra on the first ranks", "[parallel]") {
  CHECK(shard_range(7, 3, 0).offset == 0);
  CHECK(shard_range(7, 3, 0).length == 3);
  CHECK(shard_range(7, 3, 1).offset == 3);
  CHECK(shard_range(7, 3, 1).length == 2);
  CHECK(shard_range(7, 3, 2).offset == 5);
  CHECK(shard_range(7, 3, 2).length == 2);
  CHECK(shard_range(8, 2, 1).offset == 4);
}

TEST_CASE("tensor parallel: every region op, forward and backward", "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  const int rank = group->rank(), world = group->size();
  const double tol = 1e-6;

  SECTION("copy_to: identity forward, gradients summed backward") {
    const Variable x = leaf(of_rank(0, kShape));
    const Variable y = copy_to_tensor_region(x, group);
    CHECK(mismatch(y.data(), x.data(), 0, 0) == "");
    y.backward(of_rank(rank, kShape, 1));
    CHECK(mismatch(x.grad(), sum_over_ranks(world, kShape, 1), tol, 0) == "");
  }
  SECTION("reduce_from: summed forward, identity backward") {
    const Variable x = leaf(of_rank(rank, kShape));
    const Variable y = reduce_from_tensor_region(x, group);
    CHECK(mismatch(y.data(), sum_over_ranks(world, kShape, 0), tol, 0) == "");
    const Tensor g = of_rank(0, kShape, 2);
    y.backward(g);
    CHECK(mismatch(x.grad(), g, 0, 0) == "");
  }
  SECTION("scatter_to and gather_from, along the last dimension") {
    const Tensor whole = of_rank(0, kShape);
    const Variable x = leaf(whole);
    const Variable mine = scatter_to_tensor_region(x, group);
    CHECK(mismatch(mine.data(), piece(whole, 2, rank, world), 0, 0) == "");
    // Each rank's gradient of its slice lands in that slice of the whole gradient.
    const Tensor g = of_rank(rank, mine.sizes(), 3);
    mine.backward(g);
    for (int r = 0; r < world; ++r)
      CHECK(mismatch(piece(x.grad(), 2, r, world), of_rank(r, piece(whole, 2, r, world).sizes(), 3), 0, 0) == "");

    const Variable part = leaf(piece(whole, 2, rank, world));
    const Variable gathered = gather_from_tensor_region(part, group, kShape[2]);
    CHECK(mismatch(gathered.data(), whole, 0, 0) == "");
    const Tensor full_grad = of_rank(0, kShape, 4);
    gathered.backward(full_grad);
    CHECK(mismatch(part.grad(), piece(full_grad, 2, rank, world), 0, 0) == "");
  }
  SECTION("the sequence-parallel ones, along the sequence dimension") {
    const Tensor whole = of_rank(0, kShape);
    const Variable x = leaf(whole);
    const Variable mine = scatter_to_sequence_region(x, group);
    CHECK(mismatch(mine.data(), piece(whole, 1, rank, world), 0, 0) == "");
    mine.backward(of_rank(rank, mine.sizes(), 5));
    for (int r = 0; r < world; ++r)
      CHECK(mismatch(piece(x.grad(), 1, r, world), of_rank(r, piece(whole, 1, r, world).sizes(), 5), 0, 0) == "");

    // All-gather forward, reduce-scatter backward.
    const Variable part = leaf(piece(whole, 1, rank, world));
    const Variable gathered = gather_from_sequence_region(part, group, kShape[1]);
    CHECK(mismatch(gathered.data(), whole, 0, 0) == "");
    gathered.backward(of_rank(rank, kShape, 6));
    CHECK(mismatch(part.grad(), piece(sum_over_ranks(world, kShape, 6), 1, rank, world), tol, 0) == "");

    // Reduce-scatter forward, all-gather backward.
    const Variable partial = leaf(of_rank(rank, kShape, 7));
    const Variable reduced = reduce_scatter_to_sequence_region(partial, group);
    CHECK(mismatch(reduced.data(), piece(sum_over_ranks(world, kShape, 7), 1, rank, world), tol, 0) == "");
    reduced.backward(piece(of_rank(0, kShape, 8), 1, rank, world));
    CHECK(mismatch(partial.grad(), of_rank(0, kShape, 8), 0, 0) == "");
  }
}

namespace {

struct Reference {
  Tensor weight, bias;
};
Reference reference_linear(int64_t in, int64_t out, uint64_t seed) {
  Generator gen(seed);
  return {uniform({out, in}, gen, -0.5, 0.5), uniform({out}, gen, -0.5, 0.5)};
}

// y = x Wᵀ + b as nn::Linear computes it, with its gradients for `dy`.
struct LinearRun {
  Tensor y, dx, dweight, dbias;
};
LinearRun run_linear(const Reference& ref, const Tensor& x, const Tensor& dy) {
  nn::Linear linear(ref.weight.size(1), ref.weight.size(0));
  linear.weight.data().copy_(ref.weight);
  linear.bias.data().copy_(ref.bias);
  const Variable input = leaf(x);
  const Variable y = linear.forward(input);
  y.backward(dy);
  return {y.data().clone(), input.grad().clone(), linear.weight.grad().clone(), linear.bias.grad().clone()};
}

}  // namespace

TEST_CASE("tensor parallel: column- and row-parallel linear equal nn::Linear, forward and backward", "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  const int rank = group->rank(), world = group->size();
  constexpr int64_t kIn = 6, kOut = 7;  // 7 outputs: uneven column shards at 2 and 3 ranks
  const Reference ref = reference_linear(kIn, kOut, 11);
  const Tensor x = of_rank(0, {3, 4, kIn}), dy = of_rank(0, {3, 4, kOut}, 1);
  const LinearRun expected = run_linear(ref, x, dy);
  const double tol = 1e-5;

  SECTION("column-parallel, output gathered and not") {
    for (bool gather : {true, false}) {
      INFO("gather_output " << gather);
      ColumnParallelLinear column(kIn, kOut, group, /*bias=*/true, gather);
      column.load_full(ref.weight, ref.bias);
      CHECK(column.placement("weight").sharded_dim == 0);
      CHECK(column.weight.sizes() == Shape{shard_range(kOut, world, rank).length, kIn});
      const Variable input = leaf(x);
      const Variable y = column.forward(input);
      CHECK(mismatch(y.data(), gather ? expected.y : piece(expected.y, 2, rank, world), tol, tol) == "");
      y.backward(gather ? dy : piece(dy, 2, rank, world));
      CHECK(mismatch(input.grad(), expected.dx, tol, tol) == "");  // summed over the ranks' features
      CHECK(mismatch(column.weight.grad(), piece(expected.dweight, 0, rank, world), tol, tol) == "");
      CHECK(mismatch(column.bias.grad(), piece(expected.dbias, 0, rank, world), tol, tol) == "");
    }
  }
  SECTION("row-parallel, input split by the layer and already split") {
    for (bool parallel_input : {false, true}) {
      INFO("input_is_parallel " << parallel_input);
      RowParallelLinear row(kIn, kOut, group, /*bias=*/true, parallel_input);
      row.load_full(ref.weight, ref.bias);
      CHECK(row.placement("weight").sharded_dim == 1);
      CHECK_FALSE(row.placement("bias").sharded());
      const Variable input = leaf(parallel_input ? piece(x, 2, rank, world) : x);
      const Variable y = row.forward(input);
      CHECK(mismatch(y.data(), expected.y, tol, tol) == "");
      y.backward(dy);
      CHECK(mismatch(input.grad(), parallel_input ? piece(expected.dx, 2, rank, world) : expected.dx, tol, tol) == "");
      CHECK(mismatch(row.weight.grad(), piece(expected.dweight, 1, rank, world), tol, tol) == "");
      CHECK(mismatch(row.bias.grad(), expected.dbias, tol, tol) == "");  // the same on every rank
    }
  }
  SECTION("an MLP: column-parallel, GELU, row-parallel equals Linear, GELU, Linear") {
    constexpr int64_t kHidden = 10;  // 5 | 3,3,4-way uneven at 3 ranks: (4, 3, 3)
    const Reference up = reference_linear(kIn, kHidden, 21), down = reference_linear(kHidden, kIn, 22);
    nn::Linear full_up(kIn, kHidden), full_down(kHidden, kIn);
    full_up.weight.data().copy_(up.weight);
    full_up.bias.data().copy_(up.bias);
    full_down.weight.data().copy_(down.weight);
    full_down.bias.data().copy_(down.bias);
    const Variable x_full = leaf(x);
    const Variable y_full = full_down.forward(autograd::gelu(full_up.forward(x_full)));
    y_full.backward(of_rank(0, y_full.sizes(), 2));

    ColumnParallelLinear column(kIn, kHidden, group);
    RowParallelLinear row(kHidden, kIn, group);
    column.load_full(up.weight, up.bias);
    row.load_full(down.weight, down.bias);
    const Variable x_tp = leaf(x);
    const Variable y_tp = row.forward(autograd::gelu(column.forward(x_tp)));
    CHECK(mismatch(y_tp.data(), y_full.data(), tol, tol) == "");
    y_tp.backward(of_rank(0, y_tp.sizes(), 2));
    CHECK(mismatch(x_tp.grad(), x_full.grad(), tol, tol) == "");
    CHECK(mismatch(column.weight.grad(), piece(full_up.weight.grad(), 0, rank, world), tol, tol) == "");
    CHECK(mismatch(row.weight.grad(), piece(full_down.weight.grad(), 1, rank, world), tol, tol) == "");
    CHECK(mismatch(row.bias.grad(), full_down.bias.grad(), tol, tol) == "");
  }
}

TEST_CASE("tensor parallel: the layers' own initialisation gives the ranks slices of one weight", "[parallel]") {
  // Every rank draws the whole weight from one generator and keeps its slice, so the slices,
  // gathered, are one nn::Linear-style weight that every rank agrees on.
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  ColumnParallelLinear column(9, 7, group);
  RowParallelLinear row(7, 9, group);
  const Tensor column_weight = gather_along(column.weight.data(), 0, 7, *group);
  const Tensor row_weight = gather_along(row.weight.data(), 1, 7, *group);
  for (const Tensor& weight : {column_weight, row_weight}) {
    Tensor from_rank0 = weight.clone();
    group->broadcast(from_rank0, 0);
    CHECK(mismatch(weight, from_rank0, 0, 0) == "");
    const double bound = 1.0 / std::sqrt(static_cast<double>(weight.size(1)));
    for (double w : weight.to_vector<double>()) CHECK(std::fabs(w) <= bound);
  }
}

TEST_CASE("tensor parallel: inputs and sizes that do not fit are errors naming the numbers", "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  const int rank = group->rank(), world = group->size();
  RowParallelLinear row(6, 4, group);
  const int64_t mine = shard_range(6, world, rank).length;
  CHECK(error_of([&] {
          row.forward(Variable(Tensor::zeros({2, 6})));
        }) == "RowParallelLinear: input of shape [2, 6] on tensor-parallel rank " + std::to_string(rank) + " of " +
                  std::to_string(world) + " should end in its " + std::to_string(mine) +
                  " of the 6 input features (the input is taken as already split: input_is_parallel)");
  CHECK(error_of([&] { ColumnParallelLinear(4, 1, group); }) ==
        "ColumnParallelLinear: 1 output features cannot be split over " + std::to_string(world) +
            " tensor-parallel ranks; use a tensor-parallel size of at most 1");
  ColumnParallelLinear column(4, 8, group);
  CHECK(error_of([&] {
          column.load_full(Tensor::zeros({8, 5}));
        }) == "ColumnParallelLinear.load_full: weight of shape [8, 5], expected [8, 4]");
  CHECK(error_of([&] {
          gather_from_tensor_region(Variable(Tensor::zeros({2, 1})), group, 8);
        }) == "tensor parallelism: rank " + std::to_string(rank) + " of " + std::to_string(world) +
                  " holds 1 of the 8 entries of dim 1 of [2, 1]; it should hold " +
                  std::to_string(shard_range(8, world, rank).length));
}

TEST_CASE("tensor parallel: the vocabulary pads to a multiple of 128 x tp", "[parallel]") {
  CHECK(padded_vocab_size(50257, 1) == 50304);
  CHECK(padded_vocab_size(50257, 2) == 50432);
  CHECK(padded_vocab_size(50257, 4) == 50688);
  CHECK(padded_vocab_size(13, 3) == 384);
}

namespace {
// Targets over a vocabulary of `vocab`, some ignored.
Tensor targets_for(int64_t rows, int64_t vocab) {
  std::vector<int64_t> t(rows);
  for (int64_t i = 0; i < rows; ++i) t[i] = i % 4 == 3 ? kDefaultIgnoreIndex : (i * 5 + 2) % vocab;
  return Tensor::from_vector(t, {rows});
}
}  // namespace

TEST_CASE("tensor parallel: vocab-parallel cross-entropy equals cross-entropy over the whole vocabulary",
          "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  const int rank = group->rank(), world = group->size();
  constexpr int64_t kVocab = 13;
  const Tensor logits = mul(of_rank(0, {2, 5, kVocab}), 3.0);
  const Tensor targets = targets_for(10, kVocab).reshape({2, 5});
  const double tol = 1e-5;
  for (std::optional<double> normaliser : {std::optional<double>{}, std::optional<double>{4.0}}) {
    INFO("normaliser " << (normaliser ? *normaliser : 0.0));
    const Variable full = leaf(logits);
    const Variable expected = nn::cross_entropy(full, targets, normaliser);
    expected.backward();

    // Columns split unevenly, no padding.
    const ShardRange range = shard_range(kVocab, world, rank);
    const Variable mine = leaf(piece(logits, 2, rank, world));
    const Variable loss = vocab_parallel_cross_entropy(mine, targets, {range.offset, range.length}, group, normaliser);
    CHECK(std::fabs(loss.data().item() - expected.data().item()) <= tol);
    loss.backward();
    CHECK(mismatch(mine.grad(), piece(full.grad(), 2, rank, world), tol, tol) == "");

    // Padded as VocabParallelEmbedding pads: 128 columns per rank, the real ones first; the
    // padding's logits (large, to show they are not counted) get no gradient.
    const int64_t per_rank = padded_vocab_size(kVocab, world) / world, start = rank * per_rank;
    const int64_t real = std::clamp<int64_t>(kVocab - start, 0, per_rank);
    Tensor padded = Tensor::full({2, 5, per_rank}, 50.0);
    if (real > 0) padded.narrow(2, 0, real).copy_(logits.narrow(2, start, real));
    const Variable padded_leaf = leaf(padded);
    const Variable padded_loss = vocab_parallel_cross_entropy(padded_leaf, targets, {start, real}, group, normaliser);
    CHECK(std::fabs(padded_loss.data().item() - expected.data().item()) <= tol);
    padded_loss.backward();
    if (real > 0)
      CHECK(mismatch(padded_leaf.grad().narrow(2, 0, real), full.grad().narrow(2, start, real), tol, tol) == "");
    CHECK(mismatch(padded_leaf.grad().narrow(2, real, per_rank - real), Tensor::zeros({2, 5, per_rank - real}), 0, 0) ==
          "");
  }
}

TEST_CASE("tensor parallel: the vocab-parallel embedding equals nn::Embedding; padding rows get nothing",
          "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  const int rank = group->rank(), world = group->size();
  constexpr int64_t kVocab = 200, kDim = 3;  // 200 rows: rank 1 of 2 holds real and padding rows
  nn::Embedding full(kVocab, kDim);
  VocabParallelEmbedding parallel(kVocab, kDim, group);
  parallel.load_full(full.weight.data());
  const int64_t per_rank = padded_vocab_size(kVocab, world) / world;
  CHECK(parallel.weight.sizes() == Shape{per_rank, kDim});
  CHECK(parallel.placement("weight").sharded_dim == 0);

  std::vector<int64_t> id_values;
  for (int64_t i = 0; i < 12; ++i) id_values.push_back((i * 37 + 5) % kVocab);
  const Tensor ids = Tensor::from_vector(id_values, {3, 4});
  const Variable expected = full.forward(Variable(ids));
  const Variable y = parallel.forward(Variable(ids));
  CHECK(mismatch(y.data(), expected.data(), 0, 0) == "");  // one real row, zeros elsewhere: exact
  const Tensor dy = of_rank(0, {3, 4, kDim}, 9);
  expected.backward(dy);
  y.backward(dy);
  const int64_t start = rank * per_rank, real = std::clamp<int64_t>(kVocab - start, 0, per_rank);
  CHECK(parallel.local_real_rows == real);
  if (real > 0)
    CHECK(mismatch(parallel.weight.grad().narrow(0, 0, real), full.weight.grad().narrow(0, start, real), 1e-6, 0) ==
          "");
  CHECK(mismatch(parallel.weight.grad().narrow(0, real, per_rank - real), Tensor::zeros({per_rank - real, kDim}), 0,
                 0) == "");
  CHECK(error_of([&] {
          parallel.forward(Variable(Tensor::from_vector(std::vector<int64_t>{3, 200}, {2})));
        }) == "VocabParallelEmbedding: ids range over [3, 200] but the vocabulary has 200 entries");
}

namespace {
// This rank's rows of each of `parts` equal parts of dim 0, part after part (a fused q, k, v).
Tensor fused_piece(const Tensor& whole, int parts, int rank, int world) {
  const int64_t part = whole.size(0) / parts;
  const ShardRange range = shard_range(part, world, rank);
  Shape shape = whole.sizes();
  shape[0] = parts * range.length;
  const Tensor out = Tensor::empty(shape, whole.dtype());
  for (int p = 0; p < parts; ++p)
    out.narrow(0, p * range.length, range.length).copy_(whole.narrow(0, p * part + range.offset, range.length));
  return out;
}
}  // namespace

TEST_CASE("tensor parallel: the GPT block with split heads and MLP equals nn::TransformerBlock", "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  const int rank = group->rank(), world = group->size();
  for (const bool sequence_parallel : {false, true}) {
    INFO("sequence parallel " << sequence_parallel);
    nn::TransformerConfig config;
    config.n_embd = 12;
    config.n_head = 6;  // 3 heads a rank at 2 ranks, 2 at 3
    nn::TransformerBlock full(config);
    {
      // Layer norms away from 1 and 0, so their gradients and scales matter.
      Generator gen(5);
      for (const auto& norm : {full.ln_1, full.ln_2}) {
        norm->weight.data().copy_(uniform({12}, gen, 0.5, 1.5));
        norm->bias.data().copy_(uniform({12}, gen, -0.5, 0.5));
      }
    }
    TensorParallelBlock parallel(config, group, sequence_parallel);
    parallel.load_full(full);
    CHECK(parallel.attn->local_heads == 6 / world);
    CHECK(parallel.attn->c_attn->placement("weight").fused_parts == 3);

    // Sequence parallelism: this rank's positions of the input, of the output and its gradient.
    const Tensor x = of_rank(0, {2, 6, 12}), dy = of_rank(0, {2, 6, 12}, 3);
    const auto mine = [&](const Tensor& t) { return sequence_parallel ? piece(t, 1, rank, world) : t; };
    const Variable x_full = leaf(x), x_tp = leaf(mine(x));
    const Variable y_full = full.forward(x_full), y_tp = parallel.forward(x_tp);
    const double tol = 1e-5;
    CHECK(mismatch(y_tp.data(), mine(y_full.data()), tol, tol) == "");
    y_full.backward(dy);
    y_tp.backward(mine(dy));
    CHECK(mismatch(x_tp.grad(), mine(x_full.grad()), tol, tol) == "");
    // Replicated: the unsharded gradients, on every rank.
    CHECK(mismatch(parallel.ln_1->weight.grad(), full.ln_1->weight.grad(), tol, tol) == "");
    CHECK(mismatch(parallel.ln_2->bias.grad(), full.ln_2->bias.grad(), tol, tol) == "");
    CHECK(mismatch(parallel.attn->c_proj->bias.grad(), full.attn->c_proj->bias.grad(), tol, tol) == "");
    // Sharded: this rank's slice of them.
    CHECK(mismatch(parallel.attn->c_attn->weight.grad(), fused_piece(full.attn->c_attn->weight.grad(), 3, rank, world),
                   tol, tol) == "");
    CHECK(mismatch(parallel.attn->c_attn->bias.grad(), fused_piece(full.attn->c_attn->bias.grad(), 3, rank, world), tol,
                   tol) == "");
    CHECK(mismatch(parallel.attn->c_proj->weight.grad(), piece(full.attn->c_proj->weight.grad(), 1, rank, world), tol,
                   tol) == "");
    CHECK(mismatch(parallel.mlp->c_fc->weight.grad(), piece(full.mlp->c_fc->weight.grad(), 0, rank, world), tol, tol) ==
          "");
    CHECK(mismatch(parallel.mlp->c_proj->weight.grad(), piece(full.mlp->c_proj->weight.grad(), 1, rank, world), tol,
                   tol) == "");
    // Parameter names are the unsharded block's.
    std::vector<std::string> names, full_names;
    for (const auto& [name, p] : parallel.named_parameters()) names.push_back(name);
    for (const auto& [name, p] : full.named_parameters()) full_names.push_back(name);
    CHECK(names == full_names);
  }

  nn::TransformerConfig odd;
  odd.n_head = 5;
  odd.n_embd = 10;
  if (world > 1)
    CHECK(error_of([&] { TensorParallelBlock(odd, group); }) ==
          "tensor parallelism: 5 attention heads are not divisible by the tensor-parallel size " +
              std::to_string(world) + "; use a size that divides 5");
}

TEST_CASE("tensor parallel: GPT with tensor parallelism equals GPT, loss and every gradient, dropout on",
          "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  const int rank = group->rank(), world = group->size();
  for (const bool sequence_parallel : {false, true}) {
    INFO("sequence parallel " << sequence_parallel);
    models::GPTConfig config = small_gpt();
    config.dropout = 0.1;
    models::GPT full(config, /*seed=*/7);
    models::TensorParallelGPT parallel(config, group, {.sequence_parallel = sequence_parallel});
    parallel.load_full(full);
    nn::assign_dropout_streams(full);  // as the engine does: masks follow module names
    nn::assign_dropout_streams(parallel);

    constexpr int64_t T = 6;  // divisible by 2 and 3, as sequence parallelism needs
    std::vector<int64_t> ids(2 * T), next(2 * T);
    for (int64_t i = 0; i < 2 * T; ++i) ids[i] = (i * 97 + 13) % config.vocab_size;
    for (int64_t i = 0; i < 2 * T; ++i) next[i] = i % 5 == 4 ? kDefaultIgnoreIndex : ids[(i + 1) % (2 * T)];
    const Variable idx(Tensor::from_vector(ids, {2, T}));
    const Tensor targets = Tensor::from_vector(next, {2, T});

    nn::set_dropout_context({/*seed=*/3, /*step=*/0, {}});
    const Variable expected = nn::cross_entropy(full.forward(idx), targets);
    expected.backward();
    nn::set_dropout_context({3, 0, {}});
    const Variable loss = parallel.loss(idx, targets);
    loss.backward();
    const double tol = 1e-5;
    CHECK(std::fabs(loss.data().item() - expected.data().item()) <= tol);

    const auto& wte = *parallel.transformer->wte;
    const Tensor wte_grad = full.transformer->wte->weight.grad();  // embedding and tied head together
    if (wte.local_real_rows > 0)
      CHECK(mismatch(wte.weight.grad().narrow(0, 0, wte.local_real_rows),
                     wte_grad.narrow(0, wte.local.offset, wte.local_real_rows), tol, tol) == "");
    const int64_t padding = wte.local.length - wte.local_real_rows;
    CHECK(mismatch(wte.weight.grad().narrow(0, wte.local_real_rows, padding), Tensor::zeros({padding, 24}), 0, 0) ==
          "");
    CHECK(mismatch(parallel.transformer->wpe->weight.grad(), full.transformer->wpe->weight.grad(), tol, tol) == "");
    CHECK(mismatch(parallel.transformer->ln_f->weight.grad(), full.transformer->ln_f->weight.grad(), tol, tol) == "");
    for (int64_t layer = 0; layer < config.n_layer; ++layer) {
      INFO("block " << layer);
      const auto& tp_block = *std::static_pointer_cast<TensorParallelBlock>(parallel.transformer->h->modules()[layer]);
      const auto& block = *std::static_pointer_cast<nn::TransformerBlock>(full.transformer->h->modules()[layer]);
      CHECK(mismatch(tp_block.attn->c_attn->weight.grad(),
                     fused_piece(block.attn->c_attn->weight.grad(), 3, rank, world), tol, tol) == "");
      CHECK(mismatch(tp_block.mlp->c_proj->weight.grad(), piece(block.mlp->c_proj->weight.grad(), 1, rank, world), tol,
                     tol) == "");
      CHECK(mismatch(tp_block.ln_1->weight.grad(), block.ln_1->weight.grad(), tol, tol) == "");
      CHECK(mismatch(tp_block.attn->c_proj->bias.grad(), block.attn->c_proj->bias.grad(), tol, tol) == "");
    }
  }
  if (world > 1) {
    models::GPTConfig small;
    small.n_layer = 1, small.n_head = 6, small.n_embd = 12, small.vocab_size = 50, small.block_size = 16;
    models::TensorParallelGPT sequence_split(small, group, {.sequence_parallel = true});
    const Variable odd_length(Tensor::zeros({1, 2 * world + 1}, DType::I64));
    CHECK(error_of([&] { sequence_split.forward(odd_length); }) ==
          detail::concat("TensorParallelGPT: with sequence parallelism the sequence length ", 2 * world + 1,
                         " must be divisible by the tensor-parallel size ", world, "; use sequences of a multiple of ",
                         world, " tokens"));
  }
}

TEST_CASE("tensor parallel: the decoder decoding with each rank's heads in its cache gives the whole one's logits",
          "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  // Heads and widths that divide over 2 and 3 ranks, a vocabulary padded per rank.
  const models::DecoderConfig gpt2 = models::DecoderConfig::gpt2(2, 6, 96, 300, 32);
  models::DecoderConfig llama = models::DecoderConfig::preset("llama-tiny");  // RoPE, SwiGLU, untied
  llama.n_head = 12, llama.n_kv_head = 6, llama.hidden_size = 96, llama.intermediate_size = 192;  // GQA 12:6
  llama.vocab_size = 300;
  models::DecoderConfig multi_query = llama;  // one key/value head, replicated on every rank
  multi_query.n_kv_head = 1;
  for (const models::DecoderConfig& config : {gpt2, llama, multi_query}) {
    INFO(config.architecture << ", " << config.n_kv_head << " key/value heads");
    models::Decoder whole(config, /*seed=*/9);
    const std::vector<bool> every(config.n_layer + 2, true);
    models::Decoder split(config, 9, every, std::make_shared<models::TensorParallelDecoderLayers>(group));
    split.load_full(whole);
    whole.eval();
    split.eval();
    models::KVCache expected = whole.make_cache(1), decoded = split.make_cache(1);
    // This rank's key/value heads only (the one head, when it is replicated).
    CHECK(decoded.layers.front().keys.size(1) == std::max<int64_t>(1, config.n_kv_head / group->size()));
    const Tensor prompt = Tensor::from_vector<int64_t>({5, 17, 299, 3}, {1, 4});
    const Tensor first = models::next_token_logits(split, decoded, prompt);
    REQUIRE(first.sizes() == Shape{1, 300});
    CHECK(mismatch(first, models::next_token_logits(whole, expected, prompt), 1e-5, 1e-5) == "");
    for (int64_t token : {42, 7, 250}) {
      const Tensor next = Tensor::from_vector<int64_t>({token}, {1, 1});
      CHECK(mismatch(models::next_token_logits(split, decoded, next), models::next_token_logits(whole, expected, next),
                     1e-5, 1e-5) == "");
    }
    CHECK(decoded.position == 7);
    models::Decoder sequence_split(config, 9, every, std::make_shared<models::TensorParallelDecoderLayers>(group, true));
    CHECK(error_of([&] { sequence_split.make_cache(1); }) ==
          "Decoder: generation with sequence parallelism is not supported; build the decoder without it");
  }
}

TEST_CASE("tensor parallel: Hugging Face GPT-2 weights loaded at any tp give the unsplit logits", "[parallel]") {
  const std::shared_ptr<Communicator>& group = runtime().world_ptr();
  const models::GPTConfig config = small_gpt();
  models::GPT saved(config, /*seed=*/21);
  const std::string path = "/tmp/fathom_tp_hf_np" + std::to_string(group->size()) + ".safetensors";
  if (group->rank() == 0) models::save_gpt2_safetensors(saved, path);  // GPT-2's Conv1D layout
  group->barrier();
  models::GPT loaded(config, /*seed=*/99);  // other weights, replaced by the file's
  models::load_gpt2_safetensors(loaded, path);
  models::TensorParallelGPT parallel(config, group);
  parallel.load_full(loaded);  // each rank keeps its slice of c_attn, c_proj, c_fc and the vocabulary
  const Variable idx(Tensor::from_vector<int64_t>({1, 299, 5, 77, 140, 2}, {1, 6}));
  const Tensor mine = parallel.forward(idx).data();  // this rank's vocabulary columns, padded
  const Tensor logits = gather_along(mine, -1, parallel.transformer->wte->padded_num_embeddings, *group);
  const Tensor expected = saved.forward(idx).data();
  CHECK(mismatch(logits.narrow(2, 0, 300).contiguous(), expected, 1e-5, 1e-5) == "");
}
