#pragma once
// Which computation causal self-attention uses (DecoderConfig::attention, TransformerConfig::attention, GPTConfig::attention,
// FATHOM_ATTENTION):
//   fused  kernels/attention.h: flash-style tiles that keep only each row's logsumexp for the
//          backward (memory linear in T); SIMT arithmetic on CUDA, no tensor cores.
//   gemm   matmul(q, k^T) -> causal_softmax -> matmul(., v), and their backward: every product is
//          a GEMM (cuBLASLt on CUDA, on tensor cores for bf16/f16), at the price of keeping the
//          (B, NH, T, T) probabilities (403 MB per layer for GPT-2 at batch 16 x 1024 in bf16)
//          and of computing the masked upper triangle too. The scores are rounded to the model's
//          dtype before the softmax (f32 inside it), as in PyTorch's math attention.
//   auto   FATHOM_ATTENTION when it is set; otherwise gemm while one layer's probabilities take at
//          most kAutoGemmAttentionMaxBytes (1 GiB), fused beyond. On the CPU the gemm kernel made
//          the training step 1.1-1.3x faster in f32 and bf16 (docs/benchmarks.md); on CUDA its
//          16-bit products run on tensor cores, which the fused kernel does not use (fathom_kernel_bench
//          compares the two there). The fused kernel is the choice for memory, not speed.

#include <string>

#include "autograd/variable.h"
#include "core/tensor.h"
#include "kernels/attention.h"

namespace fathom::nn {

enum class AttentionKernel { Auto, Fused, Gemm };

// "auto", "fused" or "gemm"; anything else is an error naming `source` and the choices.
AttentionKernel parse_attention_kernel(const std::string& name, const std::string& source);
const char* attention_kernel_name(AttentionKernel kernel);

// The kernel for queries `q` (B, NH, T, HS) when `requested` was asked for: never Auto.
AttentionKernel resolve_attention_kernel(AttentionKernel requested, const Tensor& q);

// The bytes of the probabilities the gemm kernel keeps for one layer: B * NH * T * T elements
// of q's dtype, for q = (B, NH, T, HS).
int64_t attention_probability_bytes(const Tensor& q);
// The most auto lets the gemm kernel keep per layer.
inline constexpr int64_t kAutoGemmAttentionMaxBytes = int64_t{1} << 30;

// Causal attention of q (B, NH, T, HS) over k, v (B, NKV, Tk, HS) with `options`
// (kernels/attention.h) by the kernel `requested` resolves to. The gemm kernel serves the plain
// causal case (Tq = Tk, no window, no padding mask), repeating grouped kv heads for its batched
// GEMMs; anything else runs the fused kernel, which reads grouped heads in place.
autograd::Variable scaled_dot_product_attention(const autograd::Variable& q, const autograd::Variable& k,
                                                const autograd::Variable& v, const AttentionOptions& options,
                                                AttentionKernel requested);

}  // namespace fathom::nn
