// Op-registry entries of matmul: f64 reference, samples (odd sizes, every transpose, strided and
// column-major operands, broadcast batches, the folded linear-layer case), bad inputs and the
// gradient dA = dC op(B)^T, dB = op(A)^T dC, summed over broadcast batch dims. And of the fused
// linear layer (kernels/linear.h): linear and linear_gelu.
#include "kernels/elementwise.h"
#include "kernels/elementwise_math.h"
#include "kernels/linear.h"
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


// --- linear, linear_gelu ---

// x W^T + b in f64 loops, x (..., in), W (out, in).
Tensor linear_reference(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t in = w.size(1), out = w.size(0);
  const Shape& sizes = x.sizes();
  const int64_t rows = shape_numel(Shape(sizes.begin(), sizes.end() - 1));
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0;
      for (int64_t i = 0; i < in; ++i) sum += xv[r * in + i] * wv[o * in + i];
      y[r * out + o] = sum + bv[o];
    }
  Shape shape = sizes;
  shape.back() = out;
  return Tensor::from_vector(y, {rows * out}).reshape(shape);
}

std::vector<OpSample> linear_samples(DType dtype, Generator& gen) {
  auto u = [&](const Shape& shape) { return uniform_tensor(shape, dtype, gen, -1.0, 1.0); };
  return {
      {"[5, 3] -> 4", {u({5, 3}), u({4, 3}), u({4})}, {}},
      {"[2, 3, 8] -> 16 (rows fold; a GELU input row of 16 fits cuBLASLt's epilogue)",
       {u({2, 3, 8}), u({16, 8}), u({16})}, {}},
      {"1-D input [6] -> 8", {u({6}), u({8, 6}), u({8})}, {}},
      {"non-contiguous input and weight", {non_contiguous(u({4, 5})), non_contiguous(u({8, 5})), u({8})}, {}},
      {"odd out_features [7, 9] -> 7", {u({7, 9}), u({7, 9}), u({7})}, {}},
  };
}

std::vector<OpErrorCase> linear_error_cases(const std::string& name) {
  return {
      {"in_features differ", {Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), Tensor::zeros({4})}, {},
       name + ": input of shape [2, 3] does not end in in_features = 5 (weight of shape [4, 5])"},
      {"bias of the wrong length", {Tensor::zeros({2, 5}), Tensor::zeros({4, 5}), Tensor::zeros({3})}, {},
       name + ": bias of shape [3] must have shape [4] (out_features)"},
      {"1-D weight", {Tensor::zeros({2, 5}), Tensor::zeros({5}), Tensor::zeros({5})}, {},
       name + ": weight must be (out_features, in_features), got shape [5]"},
      {"dtype mismatch", {Tensor::zeros({2, 5}), Tensor::zeros({4, 5}, DType::F64), Tensor::zeros({4})}, {},
       name + ": expected tensors of the same dtype, got f32 and f64"},
  };
}

// The fused path rounds 16-bit results once and the unfused one after the product, the bias
// and the GELU; the f16 bound allows those extra roundings.
Tolerance linear_tolerance(DType dtype) {
  if (dtype == DType::F16) return {5e-3, 2e-3};
  if (dtype == DType::BF16) return {2e-2, 1e-2};
  return default_tolerance(dtype);
}

OpInfo linear_entry(bool gelu) {
  OpInfo info;
  info.name = gelu ? "linear_gelu" : "linear";
  // x [..., K] times weight [N, K]ᵀ: K MACs per output element; the bias and the fused GELU one
  // flop per output element each (as DeepSpeed counts addmm's bias; its F.linear leaves it out).
  info.cost = [gelu](const TensorList& in, const TensorList& out, const Attributes&) {
    const int64_t macs = out[0].numel() * in[1].size(-1);
    return OpCost{macs, 2 * macs + out[0].numel() * ((in[2].defined() ? 1 : 0) + (gelu ? 1 : 0))};
  };
  info.dtypes = {DType::F32, DType::F64, DType::BF16, DType::F16};
  if (gelu) {
    info.run = [](const TensorList& in, const Attributes&) {
      LinearGeluOutputs r = linear_gelu(in[0], in[1], in[2]);
      return TensorList{r.out, r.pre};
    };
    info.reference = [](const TensorList& in, const Attributes&) {
      const Tensor pre = linear_reference(in[0], in[1], in[2]);
      return TensorList{samples::map_f64(pre, [](double v) { return math::gelu_tanh(v); }), pre};
    };
  } else {
    info.run = [](const TensorList& in, const Attributes&) { return TensorList{linear(in[0], in[1], in[2])}; };
    info.reference = [](const TensorList& in, const Attributes&) {
      return TensorList{linear_reference(in[0], in[1], in[2])};
    };
  }
  info.samples = linear_samples;
  const std::string name = info.name;
  info.error_cases = [name] { return linear_error_cases(name); };
  info.gradient = [gelu](const GradientContext& ctx) {
    const Tensor dpre = gelu ? gelu_backward(ctx.grad_outputs[0], ctx.outputs[1]) : ctx.grad_outputs[0];
    const LinearGrads g = linear_backward(dpre, ctx.inputs[0], ctx.inputs[1], ctx.needs_input_grad[0],
                                          ctx.needs_input_grad[1], ctx.needs_input_grad[2]);
    return TensorList{g.dx, g.dweight, g.dbias};
  };
  info.gradient_uses_inputs = true;
  info.gradient_uses_outputs = gelu;  // the GELU input (pre)
  info.tolerance = linear_tolerance;
  info.has_cuda = true;
  return info;
}

}  // namespace

void register_matmul_ops(std::vector<OpInfo>& registry) {
  OpInfo info;
  info.name = "matmul";
  // K MACs per output element, K the contracted dim (after the transpose).
  info.cost = [](const TensorList& in, const TensorList& out, const Attributes& attrs) {
    const int64_t k = attr(attrs, "transpose_a") ? in[0].size(-2) : in[0].size(-1);
    const int64_t macs = out[0].numel() * k;
    return OpCost{macs, 2 * macs};
  };
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
  info.has_cuda = true;
  registry.push_back(std::move(info));
  registry.push_back(linear_entry(/*gelu=*/false));
  registry.push_back(linear_entry(/*gelu=*/true));
}

}  // namespace fathom
