#pragma once
// Fused optimizer updates over flat f32 buffers, one pass over memory each: the update of the
// fp32 master weights and their states, plus (optionally) the rounded 16-bit copy of the new
// weights that the model computes with. And the overflow check of mixed precision.
//
// Semantics follow DeepSpeed's FusedAdam (csrc/adam/multi_tensor_adam.cu) and torch.optim.SGD.
// Arithmetic is f32, as on the GPU.

#include <vector>

#include "core/tensor.h"

namespace fathom {

struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t step = 1;            // the step being taken, counted from 1 (bias correction uses it)
  bool adam_w_mode = true;     // true: decoupled weight decay (AdamW); false: L2 added to the gradient
  bool bias_correction = true;
};

// params, grads, exp_avg, exp_avg_sq: contiguous f32 tensors of equal numel (any shape).
// param_copy (optional): contiguous bf16/f16/f32 tensor of the same numel, overwritten with the
// new params rounded once.
void adam_step(const Tensor& params, const Tensor& grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const AdamHyper& hyper, const Tensor& param_copy = Tensor());

struct SgdHyper {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = false;  // momentum buffer is initialised to the gradient on the first step
};

// momentum_buffer may be undefined when momentum == 0.
void sgd_step(const Tensor& params, const Tensor& grads, const Tensor& momentum_buffer, const SgdHyper& hyper,
              const Tensor& param_copy = Tensor());

// Multi-tensor forms: the step above on every entry of the list, with one set of
// hyperparameters. Every entry is checked before any is updated; all must be on one device.
// On CUDA the whole list is updated in one kernel launch (kernels/optimizer_step_kernels.h).
struct AdamTensors {
  Tensor params, grads, exp_avg, exp_avg_sq;
  Tensor param_copy;  // optional
};
void adam_step_multi(const std::vector<AdamTensors>& tensors, const AdamHyper& hyper);

struct SgdTensors {
  Tensor params, grads;
  Tensor momentum_buffer;  // may be undefined when momentum == 0
  Tensor param_copy;       // optional
};
void sgd_step_multi(const std::vector<SgdTensors>& tensors, const SgdHyper& hyper);

// values *= factor for every entry (f32 arithmetic, the factor rounded to f32) and, where an
// entry has a copy, copy = the new values rounded once to the copy's dtype (bf16, f16 or f32).
// Mixed precision's per-parameter passes — unscaling gradients, clipping them, writing the fp32
// masters into the 16-bit model — as one kernel launch on CUDA for the whole list.
// values: contiguous f32; all entries on one device.
struct ScaleTensors {
  Tensor values;
  Tensor copy;  // optional
};
void scale_multi(const std::vector<ScaleTensors>& tensors, double factor);

// True when any element of any tensor is Inf or NaN (the fp16 overflow test).
bool has_inf_or_nan(const std::vector<Tensor>& tensors);

namespace kernels {
void adam_step_cpu(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, int64_t n,
                   const AdamHyper& hyper, DType copy_dtype, void* param_copy);
void sgd_step_cpu(float* params, const float* grads, float* momentum_buffer, int64_t n, const SgdHyper& hyper,
                  DType copy_dtype, void* param_copy);
void scale_cpu(float* values, int64_t n, float factor, DType copy_dtype, void* copy);
bool has_inf_or_nan_cpu(DType dtype, const void* data, int64_t n);
}  // namespace kernels

}  // namespace fathom
