#pragma once
// The pieces of a GPT-style decoder: causal self-attention with a fused qkv projection, the
// MLP, and the pre-LayerNorm residual block. Submodule names follow Hugging Face's GPT-2
// (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj, ln_1, ln_2), so parameter names match it.

#include "nn/attention_kernel.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/normalization.h"

namespace fathom::nn {

struct TransformerConfig {
  int64_t n_embd = 768;
  int64_t n_head = 12;
  double dropout = 0.0;
  bool bias = true;
  DType dtype = DType::F32;
  AttentionKernel attention = AttentionKernel::Auto;  // nn/attention_kernel.h
};

class CausalSelfAttention : public Module {
 public:
  explicit CausalSelfAttention(const TransformerConfig& config);
  // x: (B, T, C) -> (B, T, C)
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "CausalSelfAttention"; }

  std::shared_ptr<Linear> c_attn;  // C -> 3C (q, k, v)
  std::shared_ptr<Linear> c_proj;  // C -> C
  std::shared_ptr<Dropout> resid_dropout;
  const int64_t n_head, n_embd;
  const AttentionKernel attention;
};

// Causal multi-head attention over a fused projection's output qkv — (B, T, 3 · heads · head
// size): q, then k, then v — to (B, T, heads · head size), with the kernel `attention` resolves
// to. CausalSelfAttention's core, and a tensor-parallel rank's on its own heads.
Variable multi_head_attention(const Variable& qkv, int64_t heads, AttentionKernel attention);

class MLP : public Module {
 public:
  explicit MLP(const TransformerConfig& config);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "MLP"; }

  std::shared_ptr<Linear> c_fc;    // C -> 4C
  std::shared_ptr<Linear> c_proj;  // 4C -> C
  std::shared_ptr<Dropout> dropout;
};

// x + attn(ln_1(x)), then + mlp(ln_2(x)).
class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const TransformerConfig& config);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "TransformerBlock"; }

  std::shared_ptr<LayerNorm> ln_1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<LayerNorm> ln_2;
  std::shared_ptr<MLP> mlp;
};

}  // namespace fathom::nn
