#include "kernels/softmax.h"

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

void check_input(const Tensor& x, const char* op) {
  require_floating(x, op, "x");
  FATHOM_CHECK(x.dim() >= 1, op, ": x must have at least one dim (softmax runs over the last), got shape ",
               shape_str(x.sizes()));
}

Tensor forward(const Tensor& input, bool log, const char* op) {
  check_input(input, op);
  const Tensor x = input.contiguous();
  Tensor y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  if (x.device().is_cpu()) {
    kernels::softmax_forward_cpu(x.dtype(), y.raw_data(), x.raw_data(), N, C, log);
  } else if constexpr (kCudaBuilt) {
    kernels::softmax_forward_cuda(x.dtype(), y.raw_data(), x.raw_data(), N, C, log, cuda::current_stream());
  } else {
    fail_on_cuda(op, x);
  }
  return y;
}

Tensor backward(const Tensor& dy_in, const Tensor& y_in, bool log, const char* op) {
  check_input(y_in, op);
  require_defined(dy_in, op, "dy");
  FATHOM_CHECK(dy_in.sizes() == y_in.sizes(), op, ": dy of shape ", shape_str(dy_in.sizes()),
               " must match the forward output y of shape ", shape_str(y_in.sizes()));
  require_dtype(dy_in, y_in.dtype(), op, "dy", y_in);
  check_same_device(dy_in, y_in, op);
  const Tensor dy = dy_in.contiguous(), y = y_in.contiguous();
  Tensor dx = Tensor::empty(y.sizes(), y.dtype(), y.device());
  const int64_t C = y.size(-1), N = C == 0 ? 0 : y.numel() / C;
  if (y.device().is_cpu()) {
    kernels::softmax_backward_cpu(y.dtype(), dx.raw_data(), dy.raw_data(), y.raw_data(), N, C, log,
                                  /*accumulate=*/false);
  } else if constexpr (kCudaBuilt) {
    kernels::softmax_backward_cuda(y.dtype(), dx.raw_data(), dy.raw_data(), y.raw_data(), N, C, log,
                                   /*accumulate=*/false, cuda::current_stream());
  } else {
    fail_on_cuda(op, y);
  }
  return dx;
}

}  // namespace

Tensor softmax(const Tensor& x) { return forward(x, /*log=*/false, "softmax"); }
Tensor log_softmax(const Tensor& x) { return forward(x, /*log=*/true, "log_softmax"); }
Tensor softmax_backward(const Tensor& dy, const Tensor& y) { return backward(dy, y, false, "softmax_backward"); }
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y) { return backward(dy, y, true, "log_softmax_backward"); }

}  // namespace fathom
