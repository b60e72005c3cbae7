#include "nn/attention_kernel.h"

#include <cstdlib>

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

}  // namespace fathom::nn
