#include <cmath>
#include <string>

#include "kernels/optimizer_kernels.h"
#include "core/cuda/cuda_runtime.h"
#include "kernels/optimizer_step_kernels.h"
#include "kernels/overflow_kernels.h"

namespace fathom {
namespace {

#if FATHOM_WITH_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

void check_f32_buffer(const Tensor& t, const Tensor& params, const char* op, const char* what) {
  FATHOM_CHECK(t.defined(), op, ": ", what, " is undefined");
  FATHOM_CHECK(t.dtype() == DType::F32, op, ": ", what, " must be f32 (fp32 master state), got ", dtype_name(t.dtype()));
  FATHOM_CHECK(t.is_contiguous(), op, ": ", what, " must be contiguous (a flat buffer)");
  FATHOM_CHECK(t.numel() == params.numel(), op, ": ", what, " has ", t.numel(), " elements but params has ",
               params.numel(), " (shapes ", shape_str(t.sizes()), " and ", shape_str(params.sizes()), ")");
  FATHOM_CHECK(t.device() == params.device(), op, ": ", what, " is on ", t.device().str(), " but params on ",
               params.device().str());
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

void check_adam_hyper(const AdamHyper& h, const char* op) {
  FATHOM_CHECK(h.step >= 1, op, ": step counts from 1, got ", h.step);
  FATHOM_CHECK(h.lr >= 0 && h.eps >= 0 && h.weight_decay >= 0, op, ": lr, eps and weight_decay must be non-negative");
  FATHOM_CHECK(h.beta1 >= 0 && h.beta1 < 1 && h.beta2 >= 0 && h.beta2 < 1, op, ": betas must be in [0, 1), got (",
               h.beta1, ", ", h.beta2, ")");
}

void check_adam_tensors(const Tensor& params, const Tensor& grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& param_copy, const char* op) {
  check_f32_buffer(params, params, op, "params");
  check_f32_buffer(grads, params, op, "grads");
  check_f32_buffer(exp_avg, params, op, "exp_avg");
  check_f32_buffer(exp_avg_sq, params, op, "exp_avg_sq");
  check_copy(param_copy, params, op);
}

void check_sgd_hyper(const SgdHyper& h, const char* op) {
  FATHOM_CHECK(h.lr >= 0 && h.momentum >= 0 && h.weight_decay >= 0, op,
               ": lr, momentum and weight_decay must be non-negative");
  FATHOM_CHECK(!h.nesterov || (h.momentum > 0 && h.dampening == 0), op,
               ": nesterov momentum needs momentum > 0 and dampening = 0");
}

void check_sgd_tensors(const Tensor& params, const Tensor& grads, const Tensor& momentum_buffer,
                       const Tensor& param_copy, const SgdHyper& h, const char* op) {
  check_f32_buffer(params, params, op, "params");
  check_f32_buffer(grads, params, op, "grads");
  if (h.momentum != 0) check_f32_buffer(momentum_buffer, params, op, "momentum_buffer");
  check_copy(param_copy, params, op);
}

// The f32 values adam_step_cpu computes with, made by the same expressions for the CUDA kernels.
kernels::AdamScalars adam_scalars(const AdamHyper& h) {
  kernels::AdamScalars s;
  s.lr = static_cast<float>(h.lr);
  s.beta1 = static_cast<float>(h.beta1);
  s.beta2 = static_cast<float>(h.beta2);
  s.eps = static_cast<float>(h.eps);
  s.weight_decay = static_cast<float>(h.weight_decay);
  s.bias_correction1 =
      h.bias_correction ? static_cast<float>(1.0 - std::pow(h.beta1, static_cast<double>(h.step))) : 1.0f;
  s.bias_correction2 =
      h.bias_correction ? static_cast<float>(1.0 - std::pow(h.beta2, static_cast<double>(h.step))) : 1.0f;
  s.adam_w_mode = h.adam_w_mode;
  return s;
}

kernels::SgdScalars sgd_scalars(const SgdHyper& h) {
  return kernels::SgdScalars{static_cast<float>(h.lr),        static_cast<float>(h.momentum),
                             static_cast<float>(h.dampening), static_cast<float>(h.weight_decay),
                             h.nesterov,                      h.first_step};
}

kernels::StepTensor step_tensor(const Tensor& params, const Tensor& grads, const Tensor& state0, const Tensor& state1,
                                const Tensor& copy) {
  kernels::StepTensor t;
  t.params = params.data<float>();
  t.grads = grads.data<float>();
  t.state0 = state0.defined() ? state0.data<float>() : nullptr;
  t.state1 = state1.defined() ? state1.data<float>() : nullptr;
  t.copy = copy_pointer(copy);
  t.copy_dtype = copy_dtype(copy);
  t.n = params.numel();
  return t;
}

// The multi-tensor table lives in a temporary device tensor (whole int64 words).
Tensor step_table(size_t count, Device device) {
  const size_t bytes = count * sizeof(kernels::StepTensor);
  return Tensor::empty({static_cast<int64_t>((bytes + 7) / 8)}, DType::I64, device);
}

void check_one_device(const Tensor& params, const Tensor& first, const char* op, size_t index) {
  FATHOM_CHECK(params.device() == first.device(), op, ": tensor ", index, "'s params are on ", params.device().str(),
               " but tensor 0's on ", first.device().str(), " (one multi-tensor step runs on one device)");
}

}  // namespace

void adam_step(const Tensor& params, const Tensor& grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const AdamHyper& h, const Tensor& param_copy) {
  const char* op = "adam_step";
  check_adam_tensors(params, grads, exp_avg, exp_avg_sq, param_copy, op);
  check_adam_hyper(h, op);
  if (params.device().is_cpu()) {
    kernels::adam_step_cpu(params.data<float>(), grads.data<float>(), exp_avg.data<float>(),
                           exp_avg_sq.data<float>(), params.numel(), h, copy_dtype(param_copy),
                           copy_pointer(param_copy));
  } else if constexpr (kCudaBuilt) {
    kernels::adam_step_cuda(step_tensor(params, grads, exp_avg, exp_avg_sq, param_copy), adam_scalars(h),
                            cuda::current_stream());
  } else {
    cuda::require_device(params.device().index);  // throws: this build has no CUDA backend
  }
  bump({&params, &exp_avg, &exp_avg_sq, &param_copy});
}

void sgd_step(const Tensor& params, const Tensor& grads, const Tensor& momentum_buffer, const SgdHyper& h,
              const Tensor& param_copy) {
  const char* op = "sgd_step";
  check_sgd_tensors(params, grads, momentum_buffer, param_copy, h, op);
  check_sgd_hyper(h, op);
  const Tensor buffer = h.momentum != 0 ? momentum_buffer : Tensor();
  if (params.device().is_cpu()) {
    kernels::sgd_step_cpu(params.data<float>(), grads.data<float>(),
                          buffer.defined() ? buffer.data<float>() : nullptr, params.numel(), h,
                          copy_dtype(param_copy), copy_pointer(param_copy));
  } else if constexpr (kCudaBuilt) {
    kernels::sgd_step_cuda(step_tensor(params, grads, buffer, Tensor(), param_copy), sgd_scalars(h),
                           cuda::current_stream());
  } else {
    cuda::require_device(params.device().index);  // throws: this build has no CUDA backend
  }
  bump({&params, &momentum_buffer, &param_copy});
}

void adam_step_multi(const std::vector<AdamTensors>& tensors, const AdamHyper& h) {
  const char* op = "adam_step_multi";
  check_adam_hyper(h, op);
  for (size_t k = 0; k < tensors.size(); ++k) {
    const AdamTensors& t = tensors[k];
    const std::string name = std::string(op) + " (tensor " + std::to_string(k) + ")";
    check_adam_tensors(t.params, t.grads, t.exp_avg, t.exp_avg_sq, t.param_copy, name.c_str());
    check_one_device(t.params, tensors[0].params, op, k);
  }
  if (tensors.empty()) return;
  const Device device = tensors[0].params.device();
  if (device.is_cpu()) {
    for (const AdamTensors& t : tensors)
      kernels::adam_step_cpu(t.params.data<float>(), t.grads.data<float>(), t.exp_avg.data<float>(),
                             t.exp_avg_sq.data<float>(), t.params.numel(), h, copy_dtype(t.param_copy),
                             copy_pointer(t.param_copy));
  } else if constexpr (kCudaBuilt) {
    std::vector<kernels::StepTensor> list;
    for (const AdamTensors& t : tensors)
      list.push_back(step_tensor(t.params, t.grads, t.exp_avg, t.exp_avg_sq, t.param_copy));
    const Tensor table = step_table(list.size(), device);
    kernels::adam_step_multi_cuda(list.data(), static_cast<int64_t>(list.size()), adam_scalars(h), table.raw_data(),
                                  cuda::current_stream());
  } else {
    cuda::require_device(device.index);  // throws: this build has no CUDA backend
  }
  for (const AdamTensors& t : tensors) bump({&t.params, &t.exp_avg, &t.exp_avg_sq, &t.param_copy});
}

void sgd_step_multi(const std::vector<SgdTensors>& tensors, const SgdHyper& h) {
  const char* op = "sgd_step_multi";
  check_sgd_hyper(h, op);
  for (size_t k = 0; k < tensors.size(); ++k) {
    const SgdTensors& t = tensors[k];
    const std::string name = std::string(op) + " (tensor " + std::to_string(k) + ")";
    check_sgd_tensors(t.params, t.grads, t.momentum_buffer, t.param_copy, h, name.c_str());
    check_one_device(t.params, tensors[0].params, op, k);
  }
  if (tensors.empty()) return;
  const Device device = tensors[0].params.device();
  auto buffer_of = [&](const SgdTensors& t) { return h.momentum != 0 ? t.momentum_buffer : Tensor(); };
  if (device.is_cpu()) {
    for (const SgdTensors& t : tensors) {
      const Tensor buffer = buffer_of(t);
      kernels::sgd_step_cpu(t.params.data<float>(), t.grads.data<float>(),
                            buffer.defined() ? buffer.data<float>() : nullptr, t.params.numel(), h,
                            copy_dtype(t.param_copy), copy_pointer(t.param_copy));
    }
  } else if constexpr (kCudaBuilt) {
    std::vector<kernels::StepTensor> list;
    for (const SgdTensors& t : tensors)
      list.push_back(step_tensor(t.params, t.grads, buffer_of(t), Tensor(), t.param_copy));
    const Tensor table = step_table(list.size(), device);
    kernels::sgd_step_multi_cuda(list.data(), static_cast<int64_t>(list.size()), sgd_scalars(h), table.raw_data(),
                                 cuda::current_stream());
  } else {
    cuda::require_device(device.index);  // throws: this build has no CUDA backend
  }
  for (const SgdTensors& t : tensors) bump({&t.params, &t.momentum_buffer, &t.param_copy});
}

void scale_multi(const std::vector<ScaleTensors>& tensors, double factor) {
  const char* op = "scale_multi";
  for (size_t k = 0; k < tensors.size(); ++k) {
    const ScaleTensors& t = tensors[k];
    const std::string name = std::string(op) + " (tensor " + std::to_string(k) + ")";
    check_f32_buffer(t.values, t.values, name.c_str(), "values");
    check_copy(t.copy, t.values, name.c_str());
    check_one_device(t.values, tensors[0].values, op, k);
  }
  if (tensors.empty()) return;
  const Device device = tensors[0].values.device();
  const auto f32_factor = static_cast<float>(factor);
  if (device.is_cpu()) {
    for (const ScaleTensors& t : tensors)
      kernels::scale_cpu(t.values.data<float>(), t.values.numel(), f32_factor, copy_dtype(t.copy),
                         copy_pointer(t.copy));
  } else if constexpr (kCudaBuilt) {
    std::vector<kernels::StepTensor> list;
    for (const ScaleTensors& t : tensors) list.push_back(step_tensor(t.values, t.values, Tensor(), Tensor(), t.copy));
    const Tensor table = step_table(list.size(), device);
    kernels::scale_multi_cuda(list.data(), static_cast<int64_t>(list.size()), f32_factor, table.raw_data(),
                              cuda::current_stream());
  } else {
    cuda::require_device(device.index);  // throws: this build has no CUDA backend
  }
  for (const ScaleTensors& t : tensors) bump({&t.values, &t.copy});
}

// CPU tensors are scanned at once. Device tensors each get one kernel that raises a device flag,
// read back once at the end: the check costs one synchronisation however many tensors there are.
bool has_inf_or_nan(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> on_device;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    if (!t.device().is_cpu()) {
      on_device.push_back(&t);
      continue;
    }
    const Tensor dense = t.contiguous();
    if (kernels::has_inf_or_nan_cpu(dense.dtype(), dense.raw_data(), dense.numel())) return true;
  }
  if (on_device.empty()) return false;
#if FATHOM_WITH_CUDA
  const Tensor& first = *on_device.front();
  std::vector<Tensor> dense_copies;  // tensors with more dims than a layout holds, made contiguous
  std::vector<kernels::NonFiniteScan> scans;
  for (const Tensor* t : on_device) {
    check_same_device(*t, first, "has_inf_or_nan");
    FATHOM_CHECK(is_floating_point(t->dtype()), "has_inf_or_nan: needs a floating-point tensor, got ",
                 dtype_name(t->dtype()));
    const Tensor& view = t->dim() <= kMaxElementwiseDims ? *t : dense_copies.emplace_back(t->contiguous());
    kernels::NonFiniteScan& scan = scans.emplace_back();
    scan.dtype = view.dtype();
    scan.data = view.raw_data();
    scan.layout.ndim = static_cast<int>(view.dim());
    scan.layout.numel = view.numel();
    scan.layout.contiguous = view.is_contiguous();
    for (int d = 0; d < scan.layout.ndim; ++d) {
      scan.layout.sizes[d] = view.size(d);
      scan.layout.strides[0][d] = view.stride(d);
    }
  }
  const Tensor flag = Tensor::empty({1}, DType::I32, first.device());
  kernels::flag_inf_or_nan_cuda(scans.data(), static_cast<int64_t>(scans.size()), flag.data<int32_t>(),
                                cuda::current_stream());
  return flag.item() != 0;
#else
  cuda::require_device(on_device.front()->device().index);  // throws: this build has no CUDA backend
  return false;
#endif
}

}  // namespace fathom
