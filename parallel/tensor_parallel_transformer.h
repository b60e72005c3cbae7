#pragma once
// The GPT block with tensor parallelism (Megatron's layout), the same function as
// nn::TransformerBlock: attention heads split over the tensor-parallel group — the fused q, k, v
// projection column-parallel with its three parts split alike, so a rank holds whole heads of
// each — and the output projection row-parallel; the MLP column-parallel → GELU →
// row-parallel; the layer norms and the residual path replicated. Per block and micro-batch: two
// all-reduces forward (after each row-parallel projection) and two backward. Submodule and
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
  TensorParallelAttention(const nn::TransformerConfig& config, std::shared_ptr<Communicator> group);
  Variable forward(const Variable& x) override;  // (B, T, C) -> (B, T, C), replicated
  std::string type_name() const override { return "TensorParallelAttention"; }
  void load_full(const nn::CausalSelfAttention& full);

  std::shared_ptr<ColumnParallelLinear> c_attn;  // C -> 3C, this rank's heads of q, k and v
  std::shared_ptr<RowParallelLinear> c_proj;     // this rank's heads -> C
  std::shared_ptr<nn::Dropout> resid_dropout;
  const int64_t n_head, n_embd, local_heads;
  const nn::AttentionKernel attention;
};

class TensorParallelMLP : public nn::Module {
 public:
  TensorParallelMLP(const nn::TransformerConfig& config, std::shared_ptr<Communicator> group);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "TensorParallelMLP"; }
  void load_full(const nn::MLP& full);

  std::shared_ptr<ColumnParallelLinear> c_fc;  // C -> 4C, split
  std::shared_ptr<RowParallelLinear> c_proj;   // 4C, split -> C
  std::shared_ptr<nn::Dropout> dropout;
};

class TensorParallelBlock : public nn::Module {
 public:
  TensorParallelBlock(const nn::TransformerConfig& config, std::shared_ptr<Communicator> group);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "TensorParallelBlock"; }
  // Takes this rank's shards of an unsharded block's parameters.
  void load_full(const nn::TransformerBlock& full);

  std::shared_ptr<nn::LayerNorm> ln_1;
  std::shared_ptr<TensorParallelAttention> attn;
  std::shared_ptr<nn::LayerNorm> ln_2;
  std::shared_ptr<TensorParallelMLP> mlp;
};

}  // namespace fathom::parallel
