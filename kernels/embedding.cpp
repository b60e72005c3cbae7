#include "kernels/embedding.h"

#include "kernels/nn_kernels.h"
#include "kernels/nn_op_checks.h"

namespace fathom {
namespace {
using namespace nn_checks;

void check_indices(const Tensor& indices, int64_t V, const char* op) {
  require_defined(indices, op, "indices");
  FATHOM_CHECK(indices.dtype() == DType::I64 || indices.dtype() == DType::I32, op, ": indices must be i64 or i32, got ",
               dtype_name(indices.dtype()), " of shape ", shape_str(indices.sizes()), " (convert them with .to(i64))");
  if (!indices.device().is_cpu()) return;  // range checks of device indices belong to their kernel
  const std::vector<int64_t> values = indices.to_vector<int64_t>();
  for (size_t n = 0; n < values.size(); ++n)
    FATHOM_CHECK(values[n] >= 0 && values[n] < V, op, ": index ", values[n], " at (flat) position ", n,
                 " is out of range for an embedding of ", V, " rows (valid: 0 to ", V - 1, ")");
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
      fail_on_cuda(op, weight);
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
      fail_on_cuda(op, dweight);
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
