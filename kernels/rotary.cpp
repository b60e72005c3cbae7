#include "kernels/rotary.h"

#include "core/cuda/cuda_runtime.h"
#include "kernels/nn_kernels.h"
#include "kernels/nn_op_checks.h"

namespace fathom {
namespace {
using namespace nn_checks;

void check_rotary(const Tensor& x, const Tensor& positions, const Tensor& inv_freq, const char* op) {
  require_floating(x, op, "x");
  FATHOM_CHECK(x.dim() == 4, op, ": x must be (B, H, T, D), got shape ", shape_str(x.sizes()));
  const int64_t B = x.size(0), T = x.size(2), D = x.size(3);
  require_defined(positions, op, "positions");
  FATHOM_CHECK(positions.dtype() == DType::I64 || positions.dtype() == DType::I32, op,
               ": positions must be i64 or i32, got ", positions.str(), " (convert them with .to(i64))");
  const bool shared = positions.dim() == 1 && positions.size(0) == T;
  const bool batched = positions.dim() == 2 && positions.size(0) == B && positions.size(1) == T;
  FATHOM_CHECK(shared || batched, op, ": positions must be (T) = [", T, "] or (B, T) = [", B, ", ", T,
               "] for x of shape ", shape_str(x.sizes()), ", got shape ", shape_str(positions.sizes()));
  require_defined(inv_freq, op, "inv_freq");
  FATHOM_CHECK(inv_freq.dtype() == DType::F32 && inv_freq.dim() == 1, op,
               ": inv_freq must be a 1-D f32 tensor of R/2 frequencies, got ", inv_freq.str());
  FATHOM_CHECK(2 * inv_freq.size(0) <= D, op, ": inv_freq has ", inv_freq.size(0), " frequencies, so ",
               2 * inv_freq.size(0), " rotated dims, more than the head size D = ", D, " of x ",
               shape_str(x.sizes()));
  check_same_device(positions, x, op);
  check_same_device(inv_freq, x, op);
}

}  // namespace

Tensor rotary_embedding(const Tensor& x_in, const Tensor& positions_in, const Tensor& inv_freq_in, bool inverse) {
  const char* op = "rotary_embedding";
  check_rotary(x_in, positions_in, inv_freq_in, op);
  const Tensor x = x_in.contiguous(), inv_freq = inv_freq_in.contiguous();
  const Tensor positions = positions_in.to(DType::I64).contiguous();
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  const kernels::RotaryShape shape{x.size(0), x.size(1), x.size(2), x.size(3), 2 * inv_freq.size(0),
                                   positions.dim() == 2, inverse};
  const auto* pos = static_cast<const int64_t*>(positions.raw_data());
  const auto* freq = static_cast<const float*>(inv_freq.raw_data());
  switch (x.device().type) {
    case DeviceType::CPU:
      kernels::rotary_embedding_cpu(x.dtype(), out.raw_data(), x.raw_data(), pos, freq, shape);
      break;
    case DeviceType::CUDA:
#if FATHOM_WITH_CUDA
      kernels::rotary_embedding_cuda(x.dtype(), out.raw_data(), x.raw_data(), pos, freq, shape,
                                     cuda::current_stream());
      break;
#else
      fail_on_cuda(op, x);
#endif
  }
  return out;
}

}  // namespace fathom
