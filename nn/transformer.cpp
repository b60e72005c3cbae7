#include "nn/transformer.h"

#include "autograd/functions.h"
#include "autograd/nn_functions.h"

namespace fathom::nn {

CausalSelfAttention::CausalSelfAttention(const TransformerConfig& c)
    : n_head(c.n_head), n_embd(c.n_embd), attention(c.attention) {
  FATHOM_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0, "CausalSelfAttention: n_embd (", c.n_embd,
               ") must be a multiple of n_head (", c.n_head, ")");
  c_attn = register_module("c_attn", std::make_shared<Linear>(c.n_embd, 3 * c.n_embd, c.bias, c.dtype));
  c_proj = register_module("c_proj", std::make_shared<Linear>(c.n_embd, c.n_embd, c.bias, c.dtype));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(c.dropout));
}

Variable CausalSelfAttention::forward(const Variable& x) {
  FATHOM_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: expected input (B, T, ", n_embd, "), got ",
               shape_str(x.sizes()));
  return (*resid_dropout)((*c_proj)(multi_head_attention((*c_attn)(x), n_head, attention)));
}

Variable multi_head_attention(const Variable& qkv, int64_t heads, AttentionKernel attention) {
  FATHOM_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * heads) == 0, "multi_head_attention: expected (B, T, 3 x ", heads,
               " x head size), got ", shape_str(qkv.sizes()));
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, HS = C / heads;
  const VariableList parts = autograd::split(qkv, {C, C, C}, 2);
  auto split_heads = [&](const Variable& t) {  // (B, T, C) -> (B, NH, T, HS)
    return autograd::permute(autograd::reshape(t, {B, T, heads, HS}), {0, 2, 1, 3});
  };
  const Variable q = split_heads(parts[0]), k = split_heads(parts[1]), v = split_heads(parts[2]);
  const Variable y = scaled_dot_product_attention(q, k, v, {}, attention);
  return autograd::reshape(autograd::contiguous(autograd::permute(y, {0, 2, 1, 3})), {B, T, C});
}

MLP::MLP(const TransformerConfig& c) {
  c_fc = register_module("c_fc", std::make_shared<Linear>(c.n_embd, 4 * c.n_embd, c.bias, c.dtype));
  c_proj = register_module("c_proj", std::make_shared<Linear>(4 * c.n_embd, c.n_embd, c.bias, c.dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout));
}

Variable MLP::forward(const Variable& x) { return (*dropout)((*c_proj)(autograd::gelu((*c_fc)(x)))); }

TransformerBlock::TransformerBlock(const TransformerConfig& c) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(c.n_embd, 1e-5, c.bias, c.dtype));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(c));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(c.n_embd, 1e-5, c.bias, c.dtype));
  mlp = register_module("mlp", std::make_shared<MLP>(c));
}

Variable TransformerBlock::forward(const Variable& x) {
  const Variable h = autograd::add(x, (*attn)((*ln_1)(x)));
  return autograd::add(h, (*mlp)((*ln_2)(h)));
}

}  // namespace fathom::nn
