#include "nn/attention_kernel.h"

#include <cmath>
#include <cstdlib>

#include "autograd/nn_functions.h"

namespace fathom::nn {

AttentionKernel parse_attention_kernel(const std::string& name, const std::string& source) {
  if (name == "auto") return AttentionKernel::Auto;
  if (name == "fused") return AttentionKernel::Fused;
  if (name == "gemm") return AttentionKernel::Gemm;
  FATHOM_FAIL(source, ": unknown attention kernel \"", name, "\"; use \"auto\", \"fused\" or \"gemm\"");
}

const char* attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::Auto: return "auto";
    case AttentionKernel::Fused: return "fused";
    case AttentionKernel::Gemm: return "gemm";
  }
  return "?";
}

int64_t attention_probability_bytes(const Tensor& q) {
  const int64_t rows = q.size(-1) == 0 ? 0 : q.numel() / q.size(-1);  // B * NH * T
  return rows * q.size(-2) * static_cast<int64_t>(q.element_size());
}

AttentionKernel resolve_attention_kernel(AttentionKernel requested, const Tensor& q) {
  if (requested != AttentionKernel::Auto) return requested;
  if (const char* env = std::getenv("FATHOM_ATTENTION"); env != nullptr && *env != '\0') {
    const AttentionKernel from_env = parse_attention_kernel(env, "FATHOM_ATTENTION");
    if (from_env != AttentionKernel::Auto) return from_env;
  }
  return attention_probability_bytes(q) <= kAutoGemmAttentionMaxBytes ? AttentionKernel::Gemm : AttentionKernel::Fused;
}

autograd::Variable scaled_dot_product_attention(const autograd::Variable& q, const autograd::Variable& k,
                                                const autograd::Variable& v, const AttentionOptions& options,
                                                AttentionKernel requested) {
  const bool plain = options.window == 0 && !options.key_padding_mask.defined() && q.size(2) == k.size(2);
  if (!plain || resolve_attention_kernel(requested, q.data()) != AttentionKernel::Gemm)
    return autograd::causal_attention(q, k, v, options);
  // Tensor-core GEMMs around a masked softmax; autograd keeps the probabilities for backward.
  const int64_t group = q.size(1) / k.size(1);
  const autograd::Variable keys = group == 1 ? k : autograd::repeat_interleave(k, group, 1);
  const autograd::Variable values = group == 1 ? v : autograd::repeat_interleave(v, group, 1);
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return autograd::matmul(autograd::causal_softmax(autograd::matmul(q, keys, false, /*transpose_b=*/true), scale),
                          values);
}

}  // namespace fathom::nn
