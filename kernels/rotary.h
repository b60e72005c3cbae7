#pragma once
// Rotary position embedding (RoPE; Su et al., "RoFormer", 2021) as one fused op, in the
// rotate-half layout Hugging Face's Llama, Qwen2 and Mistral use: with x (B, H, T, D),
// positions (T) or (B, T) of i64 or i32, and inv_freq (R/2) in f32 for an even R <= D,
// each head row of token (b, t) turns its pairs (i, i + R/2), i < R/2, by the angle
//   a = positions[b, t] * inv_freq[i]          (one f32 product, as transformers forms it)
//   out[i]       = x[i] * cos a - x[i + R/2] * sin a
//   out[i + R/2] = x[i + R/2] * cos a + x[i] * sin a
// and copies dims R..D-1 unchanged (partial rotary, GPT-NeoX's rotary_pct). Positions are
// given, never implied by the row index, so a KV cache, left padding or a sequence shard
// offsets them. `inverse` turns by -a: the transposed rotation, which is the backward (a
// rotation is orthogonal). Frequency rules (base θ, linear, dynamic, llama3 scaling) only
// change inv_freq; nn/rotary.h computes it. f16/bf16/f32 compute in f32 (f64 in f64; the angle
// still from the f32 product) and round once.

#include "core/tensor.h"

namespace fathom {

Tensor rotary_embedding(const Tensor& x, const Tensor& positions, const Tensor& inv_freq, bool inverse = false);

}  // namespace fathom
