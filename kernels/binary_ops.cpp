#include "kernels/binary_ops.h"

#include "core/cuda/cuda_runtime.h"
#include "kernels/binary_kernels.h"

namespace fathom {
namespace {

BinaryLayout make_layout(const Tensor& out, const Tensor& a, const Tensor& b, const char* op) {
  FATHOM_CHECK(out.dim() <= kMaxElementwiseDims, op, ": tensors of more than ", kMaxElementwiseDims,
               " dims are not supported, got shape ", shape_str(out.sizes()));
  const Strides a_strides = broadcast_strides(a.sizes(), a.strides(), out.sizes());
  const Strides b_strides = broadcast_strides(b.sizes(), b.strides(), out.sizes());
  BinaryLayout layout;
  layout.ndim = static_cast<int>(out.dim());
  layout.numel = out.numel();
  for (int d = 0; d < layout.ndim; ++d) {
    layout.sizes[d] = out.size(d);
    layout.out_strides[d] = out.stride(d);
    layout.a_strides[d] = a_strides[d];
    layout.b_strides[d] = b_strides[d];
  }
  return layout;
}

void check_operands(const Tensor& out, const Tensor& a, const Tensor& b, const char* op) {
  FATHOM_CHECK(a.defined() && b.defined() && out.defined(), op, ": undefined tensor");
  check_same_device(a, b, op);
  check_same_device(out, a, op);
  check_same_dtype(a, b, op);
  check_same_dtype(out, a, op);
  FATHOM_CHECK(a.dtype() != DType::Bool, op, ": bool tensors are not supported (convert to an integer or float dtype)");
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), op);
  FATHOM_CHECK(broadcast_shapes(shape, out.sizes(), op) == out.sizes(), op, ": result of shape ", shape_str(shape),
               " does not fit the output of shape ", shape_str(out.sizes()));
}

}  // namespace

void add_into(const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate) {
  check_operands(out, a, b, "add");
  const BinaryLayout layout = make_layout(out, a, b, "add");
  switch (out.device().type) {
    case DeviceType::CPU:
      kernels::add_forward_cpu(out.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), layout, accumulate);
      break;
    case DeviceType::CUDA:
#if FATHOM_WITH_CUDA
      kernels::add_forward_cuda(out.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), layout, accumulate,
                                /*stream=*/nullptr);
#else
      cuda::require_device(out.device().index);  // throws: this build has no CUDA backend
#endif
      break;
  }
  out.bump_version();
}

Tensor add(const Tensor& a, const Tensor& b) {
  FATHOM_CHECK(a.defined() && b.defined(), "add: undefined tensor");
  Tensor out = Tensor::empty(broadcast_shapes(a.sizes(), b.sizes(), "add"), a.dtype(), a.device());
  add_into(out, a, b);
  return out;
}

}  // namespace fathom
