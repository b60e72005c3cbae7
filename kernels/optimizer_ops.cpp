#include <cmath>

#include "kernels/optimizer_kernels.h"

namespace fathom {
namespace {

void check_f32_buffer(const Tensor& t, const Tensor& params, const char* op, const char* what) {
  FATHOM_CHECK(t.defined(), op, ": ", what, " is undefined");
  FATHOM_CHECK(t.dtype() == DType::F32, op, ": ", what, " must be f32 (fp32 master state), got ", dtype_name(t.dtype()));
  FATHOM_CHECK(t.is_contiguous(), op, ": ", what, " must be contiguous (a flat buffer)");
  FATHOM_CHECK(t.numel() == params.numel(), op, ": ", what, " has ", t.numel(), " elements but params has ",
               params.numel(), " (shapes ", shape_str(t.sizes()), " and ", shape_str(params.sizes()), ")");
  FATHOM_CHECK(t.device().is_cpu(), op, ": optimizer kernels on ", t.device().str(), " arrive with the CUDA kernels");
}

void check_copy(const Tensor& copy, const Tensor& params, const char* op) {
  if (!copy.defined()) return;
  FATHOM_CHECK(copy.is_contiguous() && copy.numel() == params.numel(), op,
               ": the parameter copy must be contiguous with ", params.numel(), " elements, got ", copy.str());
  FATHOM_CHECK(copy.dtype() == DType::BF16 || copy.dtype() == DType::F16 || copy.dtype() == DType::F32, op,
               ": the parameter copy must be bf16, f16 or f32, got ", dtype_name(copy.dtype()));
  FATHOM_CHECK(copy.device() == params.device(), op, ": the parameter copy is on ", copy.device().str(),
               " but params on ", params.device().str());
}

void* copy_pointer(const Tensor& copy) { return copy.defined() ? copy.raw_data() : nullptr; }
DType copy_dtype(const Tensor& copy) { return copy.defined() ? copy.dtype() : DType::F32; }

void bump(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (t->defined()) t->bump_version();
}

}  // namespace

void adam_step(const Tensor& params, const Tensor& grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const AdamHyper& h, const Tensor& param_copy) {
  const char* op = "adam_step";
  check_f32_buffer(params, params, op, "params");
  check_f32_buffer(grads, params, op, "grads");
  check_f32_buffer(exp_avg, params, op, "exp_avg");
  check_f32_buffer(exp_avg_sq, params, op, "exp_avg_sq");
  check_copy(param_copy, params, op);
  FATHOM_CHECK(h.step >= 1, op, ": step counts from 1, got ", h.step);
  FATHOM_CHECK(h.lr >= 0 && h.eps >= 0 && h.weight_decay >= 0, op, ": lr, eps and weight_decay must be non-negative");
  FATHOM_CHECK(h.beta1 >= 0 && h.beta1 < 1 && h.beta2 >= 0 && h.beta2 < 1, op, ": betas must be in [0, 1), got (",
               h.beta1, ", ", h.beta2, ")");
  kernels::adam_step_cpu(params.data<float>(), grads.data<float>(), exp_avg.data<float>(), exp_avg_sq.data<float>(),
                         params.numel(), h, copy_dtype(param_copy), copy_pointer(param_copy));
  bump({&params, &exp_avg, &exp_avg_sq, &param_copy});
}

void sgd_step(const Tensor& params, const Tensor& grads, const Tensor& momentum_buffer, const SgdHyper& h,
              const Tensor& param_copy) {
  const char* op = "sgd_step";
  check_f32_buffer(params, params, op, "params");
  check_f32_buffer(grads, params, op, "grads");
  if (h.momentum != 0) check_f32_buffer(momentum_buffer, params, op, "momentum_buffer");
  check_copy(param_copy, params, op);
  FATHOM_CHECK(h.lr >= 0 && h.momentum >= 0 && h.weight_decay >= 0, op,
               ": lr, momentum and weight_decay must be non-negative");
  FATHOM_CHECK(!h.nesterov || (h.momentum > 0 && h.dampening == 0), op,
               ": nesterov momentum needs momentum > 0 and dampening = 0");
  kernels::sgd_step_cpu(params.data<float>(), grads.data<float>(),
                        h.momentum != 0 ? momentum_buffer.data<float>() : nullptr, params.numel(), h,
                        copy_dtype(param_copy), copy_pointer(param_copy));
  bump({&params, &momentum_buffer, &param_copy});
}

bool has_inf_or_nan(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    FATHOM_CHECK(t.device().is_cpu(), "has_inf_or_nan: tensors on ", t.device().str(),
                 " arrive with the CUDA kernels");
    const Tensor dense = t.contiguous();
    if (kernels::has_inf_or_nan_cpu(dense.dtype(), dense.raw_data(), dense.numel())) return true;
  }
  return false;
}

}  // namespace fathom
