#include "kernels/softmax.h"

#include <cmath>

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

void check_causal(const Tensor& x, double scale, const char* op) {
  FATHOM_CHECK(x.dim() >= 2, op, ": x must be attention scores (..., Tq, Tk), got shape ", shape_str(x.sizes()));
  FATHOM_CHECK(x.size(-1) >= x.size(-2), op, ": the scores have ", x.size(-2), " queries but ", x.size(-1),
               " keys; causal attention needs at least as many keys as queries (the last query sees every key)");
  FATHOM_CHECK(scale > 0 && std::isfinite(scale), op, ": scale must be positive and finite, got ", scale);
}

kernels::SoftmaxScaling causal_scaling(const Tensor& x, double scale) {
  return kernels::SoftmaxScaling{scale, x.size(-2)};
}

Tensor forward(const Tensor& input, bool log, const char* op, const kernels::SoftmaxScaling& scaling = {}) {
  check_input(input, op);
  const Tensor x = input.contiguous();
  Tensor y = Tensor::empty(x.sizes(), x.dtype(), x.device());
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  if (x.device().is_cpu()) {
    kernels::softmax_forward_cpu(x.dtype(), y.raw_data(), x.raw_data(), N, C, log, scaling);
  } else if constexpr (kCudaBuilt) {
    kernels::softmax_forward_cuda(x.dtype(), y.raw_data(), x.raw_data(), N, C, log, scaling, cuda::current_stream());
  } else {
    fail_on_cuda(op, x);
  }
  return y;
}

Tensor backward(const Tensor& dy_in, const Tensor& y_in, bool log, const char* op,
                const kernels::SoftmaxScaling& scaling = {}) {
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
                                  /*accumulate=*/false, scaling);
  } else if constexpr (kCudaBuilt) {
    kernels::softmax_backward_cuda(y.dtype(), dx.raw_data(), dy.raw_data(), y.raw_data(), N, C, log,
                                   /*accumulate=*/false, scaling, cuda::current_stream());
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

Tensor causal_softmax(const Tensor& x, double scale) {
  check_input(x, "causal_softmax");
  check_causal(x, scale, "causal_softmax");
  return forward(x, /*log=*/false, "causal_softmax", causal_scaling(x, scale));
}

Tensor causal_softmax_backward(const Tensor& dy, const Tensor& y, double scale) {
  check_input(y, "causal_softmax_backward");
  check_causal(y, scale, "causal_softmax_backward");
  return backward(dy, y, /*log=*/false, "causal_softmax_backward", causal_scaling(y, scale));
}

}  // namespace fathom
