#include "kernels/dropout.h"

#include "core/cuda/cuda_runtime.h"
#include "kernels/nn_kernels.h"
#include "kernels/nn_op_checks.h"

namespace fathom {
namespace {
using namespace nn_checks;

#if FATHOM_WITH_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

struct RowsLayout {
  int64_t rows, width, full_width;
};

RowsLayout check_arguments(const Tensor& x, double p, const Tensor& sample_index, int64_t column_offset,
                           int64_t full_width, const char* op) {
  require_floating(x, op, "x");
  FATHOM_CHECK(x.dim() >= 1, op, ": x must have at least one dim (viewed as rows x last dim), got shape ",
               shape_str(x.sizes()));
  FATHOM_CHECK(p >= 0 && p <= 1, op, ": p must be a probability in [0, 1], got ", p);
  const int64_t width = x.size(-1),
                rows = width == 0 ? shape_numel(Shape(x.sizes().begin(), x.sizes().end() - 1)) : x.numel() / width;
  require_defined(sample_index, op, "sample_index");
  FATHOM_CHECK(sample_index.dtype() == DType::I64 && sample_index.dim() == 1 && sample_index.size(0) == rows, op,
               ": sample_index must be an i64 vector with one global index per row of x, i.e. shape [", rows,
               "] for x of shape ", shape_str(x.sizes()), ", got ", sample_index.str());
  check_same_device(sample_index, x, op);
  const int64_t full = full_width < 0 ? width : full_width;
  FATHOM_CHECK(column_offset >= 0 && column_offset + width <= full, op, ": the shard's columns [", column_offset, ", ",
               column_offset + width, ") do not fit in full_width ", full,
               " (column_offset + x's last dim must not exceed full_width)");
  return {rows, width, full};
}

}  // namespace

Tensor dropout(const Tensor& x_in, double p, uint64_t seed, uint64_t offset, const Tensor& sample_index_in,
               int64_t column_offset, int64_t full_width) {
  const char* op = "dropout";
  const RowsLayout layout = check_arguments(x_in, p, sample_index_in, column_offset, full_width, op);
  const Tensor x = x_in.contiguous(), sample_index = sample_index_in.contiguous();
  Tensor y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  switch (x.device().type) {
    case DeviceType::CPU:
      kernels::dropout_forward_cpu(x.dtype(), y.raw_data(), x.raw_data(), sample_index.data<int64_t>(), layout.rows,
                                   layout.width, p, seed, offset, column_offset, layout.full_width,
                                   /*accumulate=*/false);
      break;
    case DeviceType::CUDA:
      if constexpr (kCudaBuilt) {
        kernels::dropout_forward_cuda(x.dtype(), y.raw_data(), x.raw_data(), sample_index.data<int64_t>(),
                                      layout.rows, layout.width, p, seed, offset, column_offset, layout.full_width,
                                      /*accumulate=*/false, cuda::current_stream());
      } else {
        fail_on_cuda(op, x);
      }
  }
  return y;
}

void dropout_backward_into(const Tensor& dx, const Tensor& dy_in, double p, uint64_t seed, uint64_t offset,
                           const Tensor& sample_index_in, int64_t column_offset, int64_t full_width, bool accumulate) {
  const char* op = "dropout_backward";
  const RowsLayout layout = check_arguments(dy_in, p, sample_index_in, column_offset, full_width, op);
  require_defined(dx, op, "dx");
  FATHOM_CHECK(dx.sizes() == dy_in.sizes() && dx.dtype() == dy_in.dtype() && dx.is_contiguous(), op,
               ": dx must be a contiguous tensor shaped and typed like dy ", dy_in.str(), ", got ", dx.str());
  check_same_device(dx, dy_in, op);
  const Tensor dy = dy_in.contiguous(), sample_index = sample_index_in.contiguous();
  switch (dy.device().type) {
    case DeviceType::CPU:
      // Dropout is linear in x, so its backward is the forward kernel applied to dy.
      kernels::dropout_forward_cpu(dy.dtype(), dx.raw_data(), dy.raw_data(), sample_index.data<int64_t>(), layout.rows,
                                   layout.width, p, seed, offset, column_offset, layout.full_width, accumulate);
      break;
    case DeviceType::CUDA:
      if constexpr (kCudaBuilt) {
        kernels::dropout_forward_cuda(dy.dtype(), dx.raw_data(), dy.raw_data(), sample_index.data<int64_t>(),
                                      layout.rows, layout.width, p, seed, offset, column_offset, layout.full_width,
                                      accumulate, cuda::current_stream());
      } else {
        fail_on_cuda(op, dy);
      }
  }
  dx.bump_version();
}

Tensor dropout_backward(const Tensor& dy, double p, uint64_t seed, uint64_t offset, const Tensor& sample_index,
                        int64_t column_offset, int64_t full_width) {
  require_floating(dy, "dropout_backward", "dy");
  Tensor dx = Tensor::empty(dy.sizes(), dy.dtype(), dy.device());
  dropout_backward_into(dx, dy, p, seed, offset, sample_index, column_offset, full_width, /*accumulate=*/false);
  return dx;
}

}  // namespace fathom
