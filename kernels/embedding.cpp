#include "kernels/embedding.h"

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

[[noreturn]] void fail_index(const char* op, int64_t value, int64_t position, int64_t V) {
  FATHOM_FAIL(op, ": index ", value, " at (flat) position ", position, " is out of range for an embedding of ", V,
              " rows (valid: 0 to ", V - 1, ")");
}

void check_indices(const Tensor& indices, int64_t V, const char* op) {
  require_defined(indices, op, "indices");
  FATHOM_CHECK(indices.dtype() == DType::I64 || indices.dtype() == DType::I32, op, ": indices must be i64 or i32, got ",
               dtype_name(indices.dtype()), " of shape ", shape_str(indices.sizes()), " (convert them with .to(i64))");
  if (!indices.device().is_cpu()) return;  // device indices are range-checked by their kernel
  const std::vector<int64_t> values = indices.to_vector<int64_t>();
  for (size_t n = 0; n < values.size(); ++n)
    if (values[n] < 0 || values[n] >= V) fail_index(op, values[n], static_cast<int64_t>(n), V);
}

// The CUDA kernels' index flag: the first out-of-range position, or -1. Reading it waits for the
// kernel; the error then reads as the CPU's.
void report_bad_index(const Tensor& flag, const Tensor& indices, int64_t V, const char* op) {
  const int64_t position = flag.to_vector<int64_t>()[0];
  if (position < 0) return;
  fail_index(op, indices.flatten().narrow(0, position, 1).to_vector<int64_t>()[0], position, V);
}

// The CUDA kernels count positions and tokens in int32.
void check_cuda_sizes(int64_t N, int64_t V, const char* op) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  FATHOM_CHECK(N < kLimit && V < kLimit, op, ": on CUDA, indices and num_embeddings must stay below 2^31, got ", N,
               " indices and ", V, " rows");
}

}  // namespace

Tensor embedding(const Tensor& indices_in, const Tensor& weight_in) {
  const char* op = "embedding";
  require_floating(weight_in, op, "weight");
  FATHOM_CHECK(weight_in.dim() == 2, op, ": weight must be 2-D (num_embeddings, embedding_dim), got shape ",
               shape_str(weight_in.sizes()));
  check_indices(indices_in, weight_in.size(0), op);
  check_same_device(indices_in, weight_in, op);
  const Tensor indices = indices_in.contiguous(), weight = weight_in.contiguous();
  const int64_t V = weight.size(0), C = weight.size(1);
  Shape out_shape = indices.sizes();
  out_shape.push_back(C);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  switch (weight.device().type) {
    case DeviceType::CPU:
      kernels::embedding_forward_cpu(weight.dtype(), indices.dtype(), out.raw_data(), indices.raw_data(),
                                     weight.raw_data(), indices.numel(), V, C);
      break;
    case DeviceType::CUDA:
      if constexpr (kCudaBuilt) {
        check_cuda_sizes(indices.numel(), V, op);
        const Tensor flag = Tensor::empty({1}, DType::I64, weight.device());
        kernels::embedding_forward_cuda(weight.dtype(), indices.dtype(), out.raw_data(), indices.raw_data(),
                                        weight.raw_data(), indices.numel(), V, C, flag.data<int64_t>(),
                                        cuda::current_stream());
        report_bad_index(flag, indices, V, op);
      } else {
        fail_on_cuda(op, weight);
      }
  }
  return out;
}

void embedding_backward_into(const Tensor& dweight, const Tensor& dout_in, const Tensor& indices_in, bool accumulate) {
  const char* op = "embedding_backward";
  require_floating(dweight, op, "dweight");
  FATHOM_CHECK(dweight.dim() == 2 && dweight.is_contiguous(), op,
               ": dweight must be a contiguous 2-D (num_embeddings, embedding_dim) tensor, got ", dweight.str());
  require_floating(dout_in, op, "dout");
  Shape expected = indices_in.defined() ? indices_in.sizes() : Shape{};
  expected.push_back(dweight.size(1));
  FATHOM_CHECK(dout_in.sizes() == expected, op, ": dout of shape ", shape_str(dout_in.sizes()),
               " must be indices.shape + [embedding_dim] = ", shape_str(expected));
  require_dtype(dout_in, dweight.dtype(), op, "dout", dweight);
  check_indices(indices_in, dweight.size(0), op);
  check_same_device(dout_in, dweight, op);
  check_same_device(indices_in, dweight, op);
  const Tensor dout = dout_in.contiguous(), indices = indices_in.contiguous();
  switch (dweight.device().type) {
    case DeviceType::CPU:
      kernels::embedding_backward_cpu(dweight.dtype(), indices.dtype(), dweight.raw_data(), dout.raw_data(),
                                      indices.raw_data(), indices.numel(), dweight.size(0), dweight.size(1),
                                      accumulate);
      break;
    case DeviceType::CUDA:
      if constexpr (kCudaBuilt) {
        const int64_t N = indices.numel(), V = dweight.size(0);
        check_cuda_sizes(N, V, op);
        const Tensor flag = Tensor::empty({1}, DType::I64, dweight.device());
        const int64_t workspace_bytes = kernels::embedding_backward_workspace_bytes_cuda(N, V);
        const Tensor workspace = Tensor::empty({(workspace_bytes + 7) / 8}, DType::I64, dweight.device());
        kernels::embedding_backward_cuda(dweight.dtype(), indices.dtype(), dweight.raw_data(), dout.raw_data(),
                                         indices.raw_data(), N, V, dweight.size(1), accumulate, flag.data<int64_t>(),
                                         workspace.raw_data(), cuda::current_stream());
        report_bad_index(flag, indices, V, op);
      } else {
        fail_on_cuda(op, dweight);
      }
  }
  dweight.bump_version();
}

Tensor embedding_backward(const Tensor& dout, const Tensor& indices, int64_t num_embeddings) {
  require_floating(dout, "embedding_backward", "dout");
  FATHOM_CHECK(dout.dim() >= 1, "embedding_backward: dout must have at least one dim, got shape ",
               shape_str(dout.sizes()));
  FATHOM_CHECK(num_embeddings >= 0, "embedding_backward: num_embeddings must be non-negative, got ", num_embeddings);
  Tensor dweight = Tensor::empty({num_embeddings, dout.size(-1)}, dout.dtype(), dout.device());
  embedding_backward_into(dweight, dout, indices, /*accumulate=*/false);
  return dweight;
}

}  // namespace fathom
