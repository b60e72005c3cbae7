#pragma once
// y = x Wᵀ + b, with W of shape [out_features, in_features] (PyTorch's layout).

#include "nn/module.h"

namespace fathom::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::F32);
  // A bias-free linear over an existing parameter of shape [out, in] (weight tying, e.g. a
  // vocabulary-parallel head sharing its embedding's shard); nothing is allocated or drawn. The
  // parameter is this module's own, so hooks on it (ZeRO-3's gathers) see its use here.
  explicit Linear(const Variable& shared_weight);
  Variable forward(const Variable& x) override;
  // gelu_tanh(forward(x)) (GPT-2's MLP up-projection); on CUDA one GEMM with the bias and the GELU
  // in cuBLASLt's epilogue. Called directly, it bypasses the module's forward hooks.
  Variable forward_gelu(const Variable& x);
  std::string type_name() const override { return "Linear"; }
  // Replaces the weight by another parameter (weight tying), e.g. GPT's head sharing wte.
  void tie_weight(const Variable& weight);

  Variable weight;
  Variable bias;  // undefined without bias
  const int64_t in_features, out_features;
};

}  // namespace fathom::nn
