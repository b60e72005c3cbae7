#include "parallel/tensor_parallel_transformer.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "parallel/sequence_parallel_norm.h"

namespace fathom::parallel {
namespace {

int64_t heads_per_rank(const nn::TransformerConfig& c, const Communicator* group) {
  FATHOM_CHECK(group != nullptr, "tensor-parallel attention: no tensor-parallel group");
  FATHOM_CHECK(c.n_head % group->size() == 0, "tensor parallelism: ", c.n_head,
               " attention heads are not divisible by ", "the tensor-parallel size ", group->size(),
               "; use a size that divides ", c.n_head);
  return c.n_head / group->size();
}

void copy_norm(const nn::LayerNorm& from, nn::LayerNorm& to) {
  autograd::NoGradGuard no_grad;
  to.weight.data().copy_(from.weight.data());
  if (from.bias.defined()) to.bias.data().copy_(from.bias.data());
}

Tensor bias_of(const nn::Linear& linear) { return linear.bias.defined() ? linear.bias.data() : Tensor(); }

// Dropout of y, which is the whole sequence, or this rank's part of it under sequence parallelism.
Variable drop(nn::Dropout& dropout, const Variable& y, const Communicator& group, bool sequence_parallel) {
  if (!sequence_parallel) return dropout(y);
  return dropout.forward_sequence_shard(y, group.rank() * y.size(1), group.size() * y.size(1));
}

std::shared_ptr<nn::LayerNorm> layer_norm(const nn::TransformerConfig& c, const std::shared_ptr<Communicator>& group,
                                          bool sequence_parallel) {
  if (sequence_parallel) return std::make_shared<SequenceParallelLayerNorm>(c.n_embd, group, 1e-5, c.bias, c.dtype);
  return std::make_shared<nn::LayerNorm>(c.n_embd, 1e-5, c.bias, c.dtype);
}

}  // namespace

TensorParallelAttention::TensorParallelAttention(const nn::TransformerConfig& c, std::shared_ptr<Communicator> group,
                                                 bool sequence_parallel)
    : n_head(c.n_head),
      n_embd(c.n_embd),
      local_heads(heads_per_rank(c, group.get())),
      attention(c.attention),
      group_(group),
      sequence_parallel_(sequence_parallel) {
  FATHOM_CHECK(c.n_embd % c.n_head == 0, "TensorParallelAttention: n_embd ", c.n_embd, " is not a multiple of n_head ",
               c.n_head);
  c_attn = register_module("c_attn", std::make_shared<ColumnParallelLinear>(c.n_embd, 3 * c.n_embd, group, c.bias,
                                                                            /*gather_output=*/false, c.dtype,
                                                                            /*fused_parts=*/3, sequence_parallel));
  c_proj = register_module("c_proj",
                           std::make_shared<RowParallelLinear>(c.n_embd, c.n_embd, group, c.bias,
                                                               /*input_is_parallel=*/true, c.dtype, sequence_parallel));
  resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(c.dropout));
}

void TensorParallelAttention::load_full(const nn::CausalSelfAttention& full) {
  c_attn->load_full(full.c_attn->weight.data(), bias_of(*full.c_attn));
  c_proj->load_full(full.c_proj->weight.data(), bias_of(*full.c_proj));
}

Variable TensorParallelAttention::forward(const Variable& x) {
  FATHOM_CHECK(x.dim() == 3 && x.size(2) == n_embd, "TensorParallelAttention: expected input (B, T, ", n_embd,
               "), got ", shape_str(x.sizes()));
  const Variable heads = nn::multi_head_attention((*c_attn)(x), local_heads, attention);
  return drop(*resid_dropout, (*c_proj)(heads), *group_, sequence_parallel_);
}

TensorParallelMLP::TensorParallelMLP(const nn::TransformerConfig& c, std::shared_ptr<Communicator> group,
                                     bool sequence_parallel)
    : group_(group), sequence_parallel_(sequence_parallel) {
  c_fc = register_module("c_fc", std::make_shared<ColumnParallelLinear>(c.n_embd, 4 * c.n_embd, group, c.bias,
                                                                        /*gather_output=*/false, c.dtype,
                                                                        /*fused_parts=*/1, sequence_parallel));
  c_proj = register_module("c_proj",
                           std::make_shared<RowParallelLinear>(4 * c.n_embd, c.n_embd, group, c.bias,
                                                               /*input_is_parallel=*/true, c.dtype, sequence_parallel));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
}

void TensorParallelMLP::load_full(const nn::MLP& full) {
  c_fc->load_full(full.c_fc->weight.data(), bias_of(*full.c_fc));
  c_proj->load_full(full.c_proj->weight.data(), bias_of(*full.c_proj));
}

Variable TensorParallelMLP::forward(const Variable& x) {
  return drop(*dropout, (*c_proj)(autograd::gelu((*c_fc)(x))), *group_, sequence_parallel_);
}

TensorParallelBlock::TensorParallelBlock(const nn::TransformerConfig& c, std::shared_ptr<Communicator> group,
                                         bool sequence_parallel) {
  ln_1 = register_module("ln_1", layer_norm(c, group, sequence_parallel));
  attn = register_module("attn", std::make_shared<TensorParallelAttention>(c, group, sequence_parallel));
  ln_2 = register_module("ln_2", layer_norm(c, group, sequence_parallel));
  mlp = register_module("mlp", std::make_shared<TensorParallelMLP>(c, group, sequence_parallel));
}

void TensorParallelBlock::load_full(const nn::TransformerBlock& full) {
  copy_norm(*full.ln_1, *ln_1);
  copy_norm(*full.ln_2, *ln_2);
  attn->load_full(*full.attn);
  mlp->load_full(*full.mlp);
}

Variable TensorParallelBlock::forward(const Variable& x) {
  const Variable h = autograd::add(x, (*attn)((*ln_1)(x)));
  return autograd::add(h, (*mlp)((*ln_2)(h)));
}

}  // namespace fathom::parallel
