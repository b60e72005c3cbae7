#pragma once
// Causal scaled-dot-product attention on (B, NH, T, HS) q, k, v:
//   out = softmax(scale * q k^T with keys after the query masked out) v,
// computed flash-attention style (no T x T matrix; see kernels/cpu/attention_cpu.cpp). The
// forward also returns lse (B, NH, T), the row logsumexp of the scaled scores, which the
// backward uses to recompute the probabilities. scale defaults to 1 / sqrt(HS). f32 and f64;
// f16/bf16 compute in f32 (lse is f32 then, f64 for f64). CUDA tensors run the twin kernels of
// kernels/cuda/attention_cuda.cu (head sizes up to 128), with the same layout and saved lse.

#include <optional>

#include "core/tensor.h"

namespace fathom {

struct AttentionOutputs {
  Tensor out, lse;
};
struct AttentionGrads {
  Tensor dq, dk, dv;  // undefined where not requested
};

AttentionOutputs causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  std::optional<double> scale = std::nullopt);
// dlse (optional) is a gradient flowing into the saved lse.
AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& out, const Tensor& lse,
                                         std::optional<double> scale = std::nullopt, const Tensor& dlse = {},
                                         bool need_dq = true, bool need_dk = true, bool need_dv = true);

}  // namespace fathom
