#pragma once
// CUDA entry points of the fused optimizer steps (adam_step, sgd_step and their multi-tensor
// forms, kernels/optimizer_kernels.h; their CPU twins adam_step_cpu / sgd_step_cpu are declared
// there). A header of its own because .cu files cannot include optimizer_kernels.h (it includes
// core/tensor.h). The hyperparameters arrive already converted to the f32 values the CPU twin
// computes with (optimizer_ops.cpp makes both from the same AdamHyper / SgdHyper).

#include <cstdint>

#include "core/dtype.h"

namespace fathom::kernels {

struct AdamScalars {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;  // 1 - beta^step, or 1 without bias correction
  bool adam_w_mode;
};

struct SgdScalars {
  float lr, momentum, dampening, weight_decay;
  bool nesterov, first_step;
};

// One flat f32 tensor of a step: Adam's exp_avg / exp_avg_sq are state0 / state1, SGD's
// momentum buffer is state0 (null when momentum == 0). copy (optional): the rounded parameter
// copy, copy_dtype f32, bf16 or f16. first_chunk: filled in by the launcher.
struct StepTensor {
  float* params = nullptr;
  const float* grads = nullptr;
  float* state0 = nullptr;
  float* state1 = nullptr;
  void* copy = nullptr;
  DType copy_dtype = DType::F32;
  int64_t n = 0;
  int64_t first_chunk = 0;
};

void adam_step_cuda(const StepTensor& tensor, const AdamScalars& scalars, void* stream);
void sgd_step_cuda(const StepTensor& tensor, const SgdScalars& scalars, void* stream);

// All `count` tensors (a host array) in one launch. table: count * sizeof(StepTensor) bytes of
// device memory, where the tensors' descriptions are copied on `stream`.
void adam_step_multi_cuda(const StepTensor* tensors, int64_t count, const AdamScalars& scalars, void* table,
                          void* stream);
void sgd_step_multi_cuda(const StepTensor* tensors, int64_t count, const SgdScalars& scalars, void* table,
                         void* stream);

// scale_multi: params *= factor (and the copy written) for all `count` tensors in one launch;
// each entry's grads must alias its params.
void scale_multi_cuda(const StepTensor* tensors, int64_t count, float factor, void* table, void* stream);

}  // namespace fathom::kernels
