#pragma once
// Which computation causal self-attention uses (TransformerConfig::attention, GPTConfig::attention,
// FATHOM_ATTENTION):
//   fused  kernels/attention.h: flash-style tiles that keep only each row's logsumexp for the
//          backward (memory linear in T); SIMT arithmetic on CUDA, no tensor cores.
//   gemm   matmul(q, k^T) -> causal_softmax -> matmul(., v), and their backward: every product is
//          a cuBLASLt GEMM on tensor cores, at the price of keeping the (B, NH, T, T) probabilities
//          (16-bit for bf16/f16 models: 403 MB per layer for GPT-2 at batch 16 x 1024) and of
//          computing the masked upper triangle too. The scores are rounded to the model's dtype
//          before the softmax (f32 inside it), as in PyTorch's math attention.
//   auto   FATHOM_ATTENTION when it is set; otherwise gemm for f16/bf16 models with T <= 2048
//          (tensor cores on CUDA; on the CPU too the GEMMs beat the fused loops for bf16, see
//          docs/benchmarks.md) while the probabilities stay small, fused for f32/f64 and longer T.

#include <string>

#include "core/tensor.h"

namespace fathom::nn {

enum class AttentionKernel { Auto, Fused, Gemm };

// "auto", "fused" or "gemm"; anything else is an error naming `source` and the choices.
AttentionKernel parse_attention_kernel(const std::string& name, const std::string& source);
const char* attention_kernel_name(AttentionKernel kernel);

// The kernel for queries `q` (B, NH, T, HS) when `requested` was asked for: never Auto.
AttentionKernel resolve_attention_kernel(AttentionKernel requested, const Tensor& q);

// Longest sequence auto sends to the gemm kernel.
inline constexpr int64_t kAutoGemmAttentionMaxT = 2048;

}  // namespace fathom::nn
