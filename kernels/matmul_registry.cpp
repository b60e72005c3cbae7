// Op-registry entry of matmul: f64 reference, samples (odd sizes, every transpose, strided and
// column-major operands, broadcast batches, the folded linear-layer case), bad inputs and the
// gradient dA = dC op(B)^T, dB = op(A)^T dC, summed over broadcast batch dims.
#include "kernels/matmul.h"
#include "kernels/op_registry.h"
#include "kernels/op_samples.h"
#include "kernels/reduction.h"

namespace fathom {
namespace {

using samples::non_contiguous;
using samples::uniform_tensor;

Attributes transposes(bool transpose_a, bool transpose_b) {
  return Attributes{{"transpose_a", transpose_a}, {"transpose_b", transpose_b}};
}

bool attr(const Attributes& attrs, const char* name) { return attrs.get_bool(name, false); }

// The naive triple loop in f64 over broadcast batches.
Tensor matmul_reference(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  Shape out_shape = matmul_shape(a.sizes(), b.sizes(), transpose_a, transpose_b);
  const int64_t nd = static_cast<int64_t>(out_shape.size());
  const int64_t M = out_shape[nd - 2], N = out_shape[nd - 1];
  const int64_t K = transpose_a ? a.size(a.dim() - 2) : a.size(a.dim() - 1);
  Shape batch(out_shape.begin(), out_shape.end() - 2);
  Shape a_full = batch, b_full = batch;
  a_full.insert(a_full.end(), a.sizes().end() - 2, a.sizes().end());
  b_full.insert(b_full.end(), b.sizes().end() - 2, b.sizes().end());
  const std::vector<double> x = a.expand(a_full).to_vector<double>(), y = b.expand(b_full).to_vector<double>();
  const int64_t count = shape_numel(batch);
  std::vector<double> out(count * M * N);
  for (int64_t n = 0; n < count; ++n) {
    const double* A = x.data() + n * M * K;
    const double* B = y.data() + n * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < K; ++k)
          sum += (transpose_a ? A[k * M + i] : A[i * K + k]) * (transpose_b ? B[j * K + k] : B[k * N + j]);
        out[(n * M + i) * N + j] = sum;
      }
  }
  return Tensor::from_vector(out, {static_cast<int64_t>(out.size())}).reshape(out_shape);
}

std::vector<OpSample> matmul_samples(DType dtype, Generator& gen) {
  auto u = [&](const Shape& shape) { return uniform_tensor(shape, dtype, gen); };
  return {
      {"[7, 3] x [3, 5]", {u({7, 3}), u({3, 5})}, transposes(false, false)},
      {"transpose_a [3, 7]^T x [3, 5]", {u({3, 7}), u({3, 5})}, transposes(true, false)},
      {"transpose_b [7, 3] x [5, 3]^T", {u({7, 3}), u({5, 3})}, transposes(false, true)},
      {"both transposed [3, 7]^T x [5, 3]^T", {u({3, 7}), u({5, 3})}, transposes(true, true)},
      {"column-major operands (non-contiguous)", {non_contiguous(u({7, 3})), non_contiguous(u({3, 5}))},
       transposes(false, false)},
      {"strided columns (copied)", {u({7, 6}).slice(1, 0, 6, 2), u({3, 10}).slice(1, 0, 10, 2)},
       transposes(false, false)},
      {"edge tiles 13x17x9 with transpose_b", {u({13, 9}), u({17, 9})}, transposes(false, true)},
      {"broadcast batch [2, 1, 4, 3] x [3, 3, 5]", {u({2, 1, 4, 3}), u({3, 3, 5})}, transposes(false, false)},
      {"linear layer [2, 3, 4] x [4, 6] (batch folds into rows)", {u({2, 3, 4}), u({4, 6})},
       transposes(false, false)},
      {"shared A [4, 3] x [2, 3, 5]", {u({4, 3}), u({2, 3, 5})}, transposes(false, false)},
      {"batched, transpose_a, non-contiguous [2, 3, 4]^T x [2, 3, 5]",
       {non_contiguous(u({2, 3, 4})), u({2, 3, 5})}, transposes(true, false)},
      {"K = 0: [3, 0] x [0, 2]", {u({3, 0}), u({0, 2})}, transposes(false, false)},
  };
}

std::vector<OpErrorCase> matmul_error_cases() {
  return {
      {"inner dims differ", {Tensor::zeros({4, 64, 768}), Tensor::zeros({512, 10})}, {},
       "matmul: shapes [4, 64, 768] and [512, 10] do not match (768 != 512)"},
      {"inner dims differ after transpose_a", {Tensor::zeros({3, 4}), Tensor::zeros({5, 4})}, transposes(true, false),
       "matmul: shapes [3, 4] and [5, 4] do not match (3 != 5) with transpose_a"},
      {"1-D operand", {Tensor::zeros({3}), Tensor::zeros({3, 4})}, {},
       "matmul: both operands need at least 2 dims, got shapes [3] and [3, 4]"},
      {"batch dims do not broadcast", {Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5})}, {},
       "matmul: batch dims of shapes [2, 3, 4] and [3, 4, 5] do not broadcast (2 vs 3)"},
      {"dtype mismatch", {Tensor::zeros({2, 2}), Tensor::zeros({2, 2}, DType::F64)}, {},
       "matmul: expected tensors of the same dtype, got f32 and f64"},
      {"integer operands", {Tensor::zeros({2, 2}, DType::I32), Tensor::zeros({2, 2}, DType::I32)}, {},
       "matmul: needs f32, f64, bf16 or f16 tensors, got i32"},
  };
}

// dA = dC op(B)^T (stored transposed when transpose_a), dB = op(A)^T dC (likewise), each summed
// over the batch dims its input was broadcast along.
TensorList matmul_gradient(const GradientContext& ctx) {
  const Tensor& a = ctx.inputs[0];
  const Tensor& b = ctx.inputs[1];
  const Tensor& grad = ctx.grad_outputs[0];
  const bool ta = attr(ctx.attrs, "transpose_a"), tb = attr(ctx.attrs, "transpose_b");
  TensorList grads(2);
  if (ctx.needs_input_grad[0]) {
    const Tensor full = ta ? matmul(b, grad, tb, true) : matmul(grad, b, false, !tb);
    grads[0] = sum_to_shape(full, ctx.input_sizes[0]);
  }
  if (ctx.needs_input_grad[1]) {
    const Tensor full = tb ? matmul(grad, a, true, ta) : matmul(a, grad, !ta, false);
    grads[1] = sum_to_shape(full, ctx.input_sizes[1]);
  }
  return grads;
}

}  // namespace

void register_matmul_ops(std::vector<OpInfo>& registry) {
  OpInfo info;
  info.name = "matmul";
  info.dtypes = {DType::F32, DType::F64, DType::BF16, DType::F16};
  info.run = [](const TensorList& in, const Attributes& attrs) {
    return TensorList{matmul(in[0], in[1], attr(attrs, "transpose_a"), attr(attrs, "transpose_b"))};
  };
  info.reference = [](const TensorList& in, const Attributes& attrs) {
    return TensorList{matmul_reference(in[0], in[1], attr(attrs, "transpose_a"), attr(attrs, "transpose_b"))};
  };
  info.samples = matmul_samples;
  info.error_cases = matmul_error_cases;
  info.gradient = matmul_gradient;
  info.gradient_uses_inputs = true;
  // Sums of K products: f32 and bf16/f16 (f32 accumulation, one rounding) within the defaults.
  info.tolerance = [](DType dtype) { return default_tolerance(dtype); };
  registry.push_back(std::move(info));
}

}  // namespace fathom
