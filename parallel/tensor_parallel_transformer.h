#pragma once
// The GPT block with tensor parallelism (Megatron's layout), the same function as
// nn::TransformerBlock: attention heads split over the tensor-parallel group — the fused q, k, v
// projection column-parallel with its three parts split alike, so a rank holds whole heads of
// each — and the output projection row-parallel; the MLP column-parallel → GELU →
// row-parallel; the layer norms and the residual path replicated. Per block and micro-batch: two
// all-reduces forward (after each row-parallel projection) and two backward.
//
// sequence_parallel (Megatron's sequence parallelism): the block's input and output, and its
// layer norms, dropouts and residual adds, hold this rank's part of the sequence, (B, T / tp, C);
// an all-gather before each column-parallel projection and a reduce-scatter after each
// row-parallel one replace the all-reduces (the same bytes), and the dropout masks are those of
// the whole sequence's positions. The layer norms' and row-parallel biases' gradients are summed
// over the group (parallel/sequence_parallel_norm.h). Submodule and
// parameter names are nn::TransformerBlock's (ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
// mlp.c_proj), each rank holding its shard.

#include <memory>

#include "nn/transformer.h"
#include "parallel/column_parallel_linear.h"
#include "parallel/communicator.h"
#include "parallel/row_parallel_linear.h"

namespace fathom::parallel {

class TensorParallelAttention : public nn::Module {
 public:
  // n_head must be divisible by the group's size.
  TensorParallelAttention(const nn::TransformerConfig& config, std::shared_ptr<Communicator> group,
                          bool sequence_parallel = false);
  // (B, T, C) -> (B, T, C), replicated; with sequence parallelism (B, T / tp, C), this rank's part.
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "TensorParallelAttention"; }
  void load_full(const nn::CausalSelfAttention& full);

  std::shared_ptr<ColumnParallelLinear> c_attn;  // C -> 3C, this rank's heads of q, k and v
  std::shared_ptr<RowParallelLinear> c_proj;     // this rank's heads -> C
  std::shared_ptr<nn::Dropout> resid_dropout;
  const int64_t n_head, n_embd, local_heads;
  const nn::AttentionKernel attention;

 private:
  std::shared_ptr<Communicator> group_;
  bool sequence_parallel_;
};

class TensorParallelMLP : public nn::Module {
 public:
  TensorParallelMLP(const nn::TransformerConfig& config, std::shared_ptr<Communicator> group,
                    bool sequence_parallel = false);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "TensorParallelMLP"; }
  void load_full(const nn::MLP& full);

  std::shared_ptr<ColumnParallelLinear> c_fc;  // C -> 4C, split
  std::shared_ptr<RowParallelLinear> c_proj;   // 4C, split -> C
  std::shared_ptr<nn::Dropout> dropout;

 private:
  std::shared_ptr<Communicator> group_;
  bool sequence_parallel_;
};

class TensorParallelBlock : public nn::Module {
 public:
  TensorParallelBlock(const nn::TransformerConfig& config, std::shared_ptr<Communicator> group,
                      bool sequence_parallel = false);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "TensorParallelBlock"; }
  // Takes this rank's shards of an unsharded block's parameters.
  void load_full(const nn::TransformerBlock& full);

  std::shared_ptr<nn::LayerNorm> ln_1;  // a SequenceParallelLayerNorm with sequence parallelism
  std::shared_ptr<TensorParallelAttention> attn;
  std::shared_ptr<nn::LayerNorm> ln_2;
  std::shared_ptr<TensorParallelMLP> mlp;
};

}  // namespace fathom::parallel
