#pragma once
// Causal scaled-dot-product attention, flash-attention style (no Tq x Tk matrix; see
// kernels/cpu/attention_cpu.cpp), for every decoder's attention:
//   q (B, NH, Tq, HS); k, v (B, NKV, Tk, HS) with NKV dividing NH (grouped-query attention:
//   head h reads kv head h / (NH / NKV) in place, no copy; NKV = NH is multi-head, 1 multi-query);
//   Tq <= Tk, query i sitting at key position i + Tk - Tq (a KV cache's new queries come last).
//   out = softmax(scale * q k^T over the keys a query sees) v, where query i sees key j when
//     j <= i + Tk - Tq                          (causal),
//     j > i + Tk - Tq - window   if window > 0  (Mistral's sliding window: the `window` latest
//                                                keys, the query's own included),
//     key_padding_mask[b, j] != 0 if given      (padding keys of a padded batch are never seen).
// The forward also returns lse (B, NH, Tq), the row logsumexp of the scaled scores, which the
// backward uses to recompute the probabilities; a query that sees no key at all (a padding
// query of a left-padded row) gets a zero output row and lse = -inf, and no gradient flows
// through it. scale defaults to 1 / sqrt(HS). f32 and f64; f16/bf16 compute in f32 (lse is f32
// then, f64 for f64). CUDA tensors run the twin kernels of kernels/cuda/attention_cuda.cu (head
// sizes up to 128), with the same layout and saved lse.

#include <optional>

#include "core/tensor.h"

namespace fathom {

struct AttentionOptions {
  std::optional<double> scale;  // 1 / sqrt(HS) when unset
  int64_t window = 0;           // > 0: a sliding window of that many keys
  Tensor key_padding_mask;      // optional (B, Tk) bool, i32 or i64 on q's device: 0 = padding
};

struct AttentionOutputs {
  Tensor out, lse;
};
struct AttentionGrads {
  Tensor dq, dk, dv;  // undefined where not requested; dk, dv have k's (B, NKV, Tk, HS) shape
};

AttentionOutputs causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionOptions& options = {});
// dlse (optional) is a gradient flowing into the saved lse.
AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& out, const Tensor& lse, const AttentionOptions& options = {},
                                         const Tensor& dlse = {}, bool need_dq = true, bool need_dk = true,
                                         bool need_dv = true);

}  // namespace fathom
