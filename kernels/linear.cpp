// The linear ops of kernels/linear.h: checks, then one cuBLASLt GEMM with its epilogue on CUDA,
// or matmul, add and gelu in turn.
#include "kernels/linear.h"

#include "core/cuda/cuda_runtime.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/reduction.h"
#if FATHOM_WITH_CUDA
#include "kernels/cuda/gemm_cublaslt.h"
#endif

namespace fathom {
namespace {

void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  FATHOM_CHECK(x.defined() && weight.defined(), op, ": undefined input or weight");
  FATHOM_CHECK(weight.dim() == 2, op, ": weight must be (out_features, in_features), got shape ",
               shape_str(weight.sizes()));
  FATHOM_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) == weight.size(1), op, ": input of shape ", shape_str(x.sizes()),
               " does not end in in_features = ", weight.size(1), " (weight of shape ", shape_str(weight.sizes()), ")");
  check_same_device(x, weight, op);
  check_same_dtype(x, weight, op);
  const DType dtype = x.dtype();
  FATHOM_CHECK(dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16 || dtype == DType::F16, op,
               ": needs f32, f64, bf16 or f16 tensors, got ", dtype_name(dtype));
  if (!bias.defined()) return;
  FATHOM_CHECK(bias.sizes() == Shape{weight.size(0)}, op, ": bias of shape ", shape_str(bias.sizes()),
               " must have shape [", weight.size(0), "] (out_features)");
  check_same_device(bias, weight, op);
  check_same_dtype(bias, weight, op);
}

Shape with_last(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}

// x as a contiguous (rows, in) matrix.
Tensor as_rows(const Tensor& x) {
  const Shape& sizes = x.sizes();
  const Tensor rows = x.reshape({shape_numel(Shape(sizes.begin(), sizes.end() - 1)), sizes.back()});
  return rows.is_contiguous() ? rows : rows.contiguous();
}

// On the CPU the bias rows are the GEMM's starting C (one broadcast write, then the product is
// added to them), rather than a separate pass that reads the product and writes the sum.
Tensor affine_unfused(const Tensor& x2d, const Tensor& weight, const Tensor& bias) {
  if (!bias.defined()) return matmul(x2d, weight, false, /*transpose_b=*/true);
  if (x2d.device().is_cpu()) {
    Tensor y = Tensor::empty({x2d.size(0), weight.size(0)}, x2d.dtype(), x2d.device());
    y.copy_(bias.expand(y.sizes()));  // a copy even for one row, where expand's view is contiguous
    matmul_into(y, x2d, weight, false, /*transpose_b=*/true, /*accumulate=*/true);
    return y;
  }
  return add(matmul(x2d, weight, false, /*transpose_b=*/true), bias);
}

#if FATHOM_WITH_CUDA
Tensor contiguous(const Tensor& t) { return t.defined() && !t.is_contiguous() ? t.contiguous() : t; }

kernels::GemmProblem problem(DType dtype, int64_t M, int64_t N, int64_t K) {
  kernels::GemmProblem p;
  p.dtype = dtype;
  p.M = M;
  p.N = N;
  p.K = K;
  p.allow_tf32 = dtype == DType::F32 && cuda::allow_tf32();
  return p;
}

// out (and aux, when defined: the GELU input) = epilogue(x2d W^T (+ bias)) in one GEMM; false,
// with nothing written, when cuBLASLt cannot fuse it.
bool fused_forward(const Tensor& x2d, const Tensor& weight, const Tensor& bias, const Tensor& out, const Tensor& aux) {
  const int64_t rows = x2d.size(0), in = x2d.size(1), n = weight.size(0);
  if (rows == 0 || in == 0 || n == 0) return false;
  kernels::GemmProblem p = problem(x2d.dtype(), rows, n, in);
  p.transpose_b = true;  // weight is stored (out, in)
  p.lda = in;
  p.ldb = in;
  p.ldc = n;
  const bool gelu = aux.defined();
  p.epilogue = gelu ? (bias.defined() ? kernels::GemmEpilogue::GeluBias : kernels::GemmEpilogue::Gelu)
                    : kernels::GemmEpilogue::Bias;
  p.ldaux = gelu ? n : 0;
  kernels::GemmPointers ptrs;
  ptrs.a = x2d.raw_data();
  ptrs.b = weight.raw_data();
  ptrs.c = out.raw_data();
  ptrs.bias = bias.defined() ? bias.raw_data() : nullptr;
  ptrs.aux = gelu ? aux.raw_data() : nullptr;
  return kernels::gemm_cublaslt(p, ptrs, x2d.device().index, cuda::current_stream());
}

// dweight = dpre2d^T x2d with dbias = the column sums of dpre2d from the same GEMM.
bool fused_weight_grad(const Tensor& dpre2d, const Tensor& x2d, const Tensor& dweight, const Tensor& dbias) {
  const int64_t rows = x2d.size(0), in = x2d.size(1), n = dpre2d.size(1);
  if (rows == 0 || in == 0 || n == 0) return false;
  kernels::GemmProblem p = problem(x2d.dtype(), n, in, rows);
  p.transpose_a = true;  // dpre2d is stored (rows, out)
  p.lda = n;
  p.ldb = in;
  p.ldc = in;
  p.epilogue = kernels::GemmEpilogue::BiasGrad;
  kernels::GemmPointers ptrs;
  ptrs.a = dpre2d.raw_data();
  ptrs.b = x2d.raw_data();
  ptrs.c = dweight.raw_data();
  ptrs.bias = dbias.raw_data();
  return kernels::gemm_cublaslt(p, ptrs, x2d.device().index, cuda::current_stream());
}
#endif

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear(x, weight, bias, "linear");
  const Tensor x2d = as_rows(x);
  const Shape shape = with_last(x.sizes(), weight.size(0));
#if FATHOM_WITH_CUDA
  if (x.device().is_cuda() && bias.defined()) {
    const Tensor out = Tensor::empty({x2d.size(0), weight.size(0)}, x.dtype(), x.device());
    if (fused_forward(x2d, contiguous(weight), contiguous(bias), out, Tensor())) return out.reshape(shape);
  }
#endif
  return affine_unfused(x2d, weight, bias).reshape(shape);
}

LinearGeluOutputs linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear(x, weight, bias, "linear_gelu");
  const Tensor x2d = as_rows(x);
  const Shape shape = with_last(x.sizes(), weight.size(0));
#if FATHOM_WITH_CUDA
  if (x.device().is_cuda()) {
    const Shape rows_shape{x2d.size(0), weight.size(0)};
    const Tensor out = Tensor::empty(rows_shape, x.dtype(), x.device());
    const Tensor pre = Tensor::empty(rows_shape, x.dtype(), x.device());
    if (fused_forward(x2d, contiguous(weight), contiguous(bias), out, pre))
      return {out.reshape(shape), pre.reshape(shape)};
  }
#endif
  const Tensor pre = affine_unfused(x2d, weight, bias);
  return {gelu(pre).reshape(shape), pre.reshape(shape)};
}

LinearGrads linear_backward(const Tensor& dpre, const Tensor& x, const Tensor& weight, bool need_dx,
                            bool need_dweight, bool need_dbias) {
  const char* op = "linear_backward";
  check_linear(x, weight, Tensor(), op);
  FATHOM_CHECK(dpre.defined(), op, ": undefined gradient");
  const Shape shape = with_last(x.sizes(), weight.size(0));
  FATHOM_CHECK(dpre.sizes() == shape, op, ": gradient of shape ", shape_str(dpre.sizes()), " must have the output's shape ",
               shape_str(shape));
  check_same_device(dpre, x, op);
  check_same_dtype(dpre, x, op);
  LinearGrads grads;
  const Tensor d2d = as_rows(dpre);
  if (need_dx) grads.dx = matmul(d2d, weight).reshape(x.sizes());
  if (!need_dweight && !need_dbias) return grads;
  const Tensor x2d = as_rows(x);
#if FATHOM_WITH_CUDA
  if (x.device().is_cuda() && need_dweight && need_dbias) {
    const Tensor dweight = Tensor::empty(weight.sizes(), weight.dtype(), weight.device());
    const Tensor dbias = Tensor::empty({weight.size(0)}, weight.dtype(), weight.device());
    if (fused_weight_grad(d2d, x2d, dweight, dbias)) {
      grads.dweight = dweight;
      grads.dbias = dbias;
      return grads;
    }
  }
#endif
  if (need_dweight) grads.dweight = matmul(d2d, x2d, /*transpose_a=*/true, false);
  if (need_dbias) grads.dbias = sum_to_shape(d2d, {weight.size(0)});
  return grads;
}

}  // namespace fathom
