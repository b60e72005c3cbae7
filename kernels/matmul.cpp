// The matmul op: shape and dtype checks, then the CPU GEMM (kernels/cpu/gemm.h) on the operands'
// own memory wherever their layout allows a plain leading dimension.
//
// Layouts: a matrix whose last dim has unit stride is row-major (ld = the row stride); one
// whose second-to-last dim has unit stride is the transpose of a row-major matrix, which the
// GEMM reads by flipping its transpose flag. Anything else is copied to contiguous memory
// first. Batch dims that lie evenly in memory for every operand merge into one strided batch;
// when B is shared by the whole batch and A's batch rows are evenly spaced, the batch folds
// into the rows of one larger GEMM (the linear-layer case: [B, T, C] x [C, N]).
// The same calls go to the CPU GEMM (kernels/cpu/gemm.h) or, for CUDA tensors, to cuBLASLt
// (kernels/cuda/gemm_cublaslt.h).
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/cuda/cuda_runtime.h"
#include "kernels/cpu/gemm.h"
#if FATHOM_WITH_CUDA
#include "kernels/cuda/gemm_cublaslt.h"
#endif

namespace fathom {
namespace {

constexpr const char* kOp = "matmul";

struct MatmulDims {
  Shape batch;
  int64_t M = 0, N = 0, K = 0;
};

std::string transposes_note(bool transpose_a, bool transpose_b) {
  if (transpose_a && transpose_b) return " with transpose_a and transpose_b";
  if (transpose_a) return " with transpose_a";
  if (transpose_b) return " with transpose_b";
  return "";
}

MatmulDims matmul_dims(const Shape& a, const Shape& b, bool transpose_a, bool transpose_b) {
  FATHOM_CHECK(a.size() >= 2 && b.size() >= 2, kOp, ": both operands need at least 2 dims, got shapes ",
               shape_str(a), " and ", shape_str(b));
  const size_t ra = a.size(), rb = b.size();
  MatmulDims dims;
  dims.M = transpose_a ? a[ra - 1] : a[ra - 2];
  const int64_t k_a = transpose_a ? a[ra - 2] : a[ra - 1];
  const int64_t k_b = transpose_b ? b[rb - 1] : b[rb - 2];
  dims.N = transpose_b ? b[rb - 2] : b[rb - 1];
  FATHOM_CHECK(k_a == k_b, kOp, ": shapes ", shape_str(a), " and ", shape_str(b), " do not match (", k_a, " != ", k_b,
               ")", transposes_note(transpose_a, transpose_b));
  dims.K = k_a;
  // Batch dims broadcast numpy-style, aligned from the right.
  const size_t na = ra - 2, nb = rb - 2, n = std::max(na, nb);
  dims.batch.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t sa = i < n - na ? 1 : a[i - (n - na)];
    const int64_t sb = i < n - nb ? 1 : b[i - (n - nb)];
    FATHOM_CHECK(sa == sb || sa == 1 || sb == 1, kOp, ": batch dims of shapes ", shape_str(a), " and ", shape_str(b),
                 " do not broadcast (", sa, " vs ", sb, ")");
    dims.batch[i] = sa == 1 ? sb : sa;
  }
  return dims;
}

// How the GEMM can read a stored rows x cols matrix in place, if it can.
struct MatrixLayout {
  bool plain = false;
  bool transposed = false;  // column-major: the transpose of a row-major matrix
  int64_t ld = 0;
};

MatrixLayout matrix_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((col_stride == 1 || cols == 1) && (rows == 1 || row_stride >= std::max<int64_t>(1, cols)))
    return {true, false, rows == 1 ? std::max<int64_t>(1, cols) : row_stride};
  if ((row_stride == 1 || rows == 1) && (cols == 1 || col_stride >= std::max<int64_t>(1, rows)))
    return {true, true, cols == 1 ? std::max<int64_t>(1, rows) : col_stride};
  return {};
}

MatrixLayout matrix_layout(const Tensor& t) {
  const int64_t d = t.dim();
  return matrix_layout(t.size(d - 2), t.size(d - 1), t.stride(d - 2), t.stride(d - 1));
}

// An operand ready for the GEMM: its matrices readable in place, batch strides broadcast.
struct GemmOperand {
  Tensor tensor;
  MatrixLayout layout;
  Strides batch_strides;
};

GemmOperand prepare(const Tensor& t, const Shape& batch) {
  GemmOperand op{t, matrix_layout(t), {}};
  if (!op.layout.plain) {
    op.tensor = t.contiguous();
    op.layout = matrix_layout(op.tensor);
  }
  const int64_t d = op.tensor.dim();
  const Shape sizes(op.tensor.sizes().begin(), op.tensor.sizes().end() - 2);
  const Strides strides(op.tensor.strides().begin(), op.tensor.strides().begin() + (d - 2));
  op.batch_strides = broadcast_strides(sizes, strides, batch);
  return op;
}

// Merges batch dims that every operand steps through evenly, and drops size-1 dims, so the
// GEMM sees as few and as long strided batches as possible.
void merge_batch_dims(Shape& sizes, std::array<Strides*, 3> strides) {
  Shape merged_sizes;
  std::array<Strides, 3> merged;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool even = !merged_sizes.empty();
    for (int k = 0; k < 3 && even; ++k) even = merged[k].back() == (*strides[k])[d] * sizes[d];
    if (even) {
      merged_sizes.back() *= sizes[d];
      for (int k = 0; k < 3; ++k) merged[k].back() = (*strides[k])[d];
    } else {
      merged_sizes.push_back(sizes[d]);
      for (int k = 0; k < 3; ++k) merged[k].push_back((*strides[k])[d]);
    }
  }
  sizes = merged_sizes;
  for (int k = 0; k < 3; ++k) *strides[k] = merged[k];
}

// Whether rows of the batch (batch dims, then the M rows with stride `row_stride`) are evenly
// spaced, so they read as one tall matrix.
bool rows_fold(const Shape& batch, const Strides& batch_strides, int64_t M, int64_t row_stride) {
  int64_t expected = row_stride * M;  // the step the innermost non-trivial batch dim must have
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    if (batch_strides[d] != expected) return false;
    expected *= batch[d];
  }
  return true;
}

const char* byte_ptr(const Tensor& t) { return static_cast<const char*>(t.raw_data()); }

void call_gemm(DType dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
               const void* B, int64_t ldb, double beta, void* C, int64_t ldc, const kernels::GemmBatch& batch) {
  switch (dtype) {
    case DType::F32:
      return kernels::gemm_batched_f32(ta, tb, M, N, K, 1.0f, static_cast<const float*>(A), lda,
                                       static_cast<const float*>(B), ldb, static_cast<float>(beta),
                                       static_cast<float*>(C), ldc, batch);
    case DType::F64:
      return kernels::gemm_batched_f64(ta, tb, M, N, K, 1.0, static_cast<const double*>(A), lda,
                                       static_cast<const double*>(B), ldb, beta, static_cast<double*>(C), ldc, batch);
    case DType::BF16:
      return kernels::gemm_batched_bf16(ta, tb, M, N, K, 1.0f, static_cast<const BFloat16*>(A), lda,
                                        static_cast<const BFloat16*>(B), ldb, static_cast<float>(beta),
                                        static_cast<float*>(C), ldc, batch);
    case DType::F16:
      return kernels::gemm_batched_f16(ta, tb, M, N, K, 1.0f, static_cast<const Half*>(A), lda,
                                       static_cast<const Half*>(B), ldb, static_cast<float>(beta),
                                       static_cast<float*>(C), ldc, batch);
    default: FATHOM_FAIL(kOp, ": unsupported dtype ", dtype_name(dtype));
  }
}

// One GEMM on the operands' memory: C (+)= op(A) op(B), over a strided batch.
struct GemmCall {
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0;
  const void* A = nullptr;
  int64_t lda = 0;
  const void* B = nullptr;
  int64_t ldb = 0;
  void* C = nullptr;
  int64_t ldc = 0;
  kernels::GemmBatch batch;
};

// Cuts C (+)= op(a) op(b) into GEMM calls on the operands' own memory; C is row-major in its
// last two dims and has the result's shape.
template <typename Fn>
void for_each_gemm(const Tensor& c, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                   const MatmulDims& dims, Fn&& gemm) {
  GemmOperand A = prepare(a, dims.batch), B = prepare(b, dims.batch);
  const int64_t nd = c.dim();
  Strides c_batch(c.strides().begin(), c.strides().begin() + (nd - 2));
  const int64_t ldc = matrix_layout(c).ld;
  // A column-major operand is the transpose of a row-major one: flip the GEMM's flag.
  const bool ta = transpose_a != A.layout.transposed, tb = transpose_b != B.layout.transposed;
  const size_t in_bytes = a.element_size(), c_bytes = c.element_size();

  const bool b_shared = std::all_of(B.batch_strides.begin(), B.batch_strides.end(), [](int64_t s) { return s == 0; });
  if (b_shared && !ta && rows_fold(dims.batch, A.batch_strides, dims.M, A.layout.ld) &&
      rows_fold(dims.batch, c_batch, dims.M, ldc)) {
    const int64_t rows = shape_numel(dims.batch) * dims.M;
    gemm(GemmCall{ta, tb, rows, dims.N, dims.K, A.tensor.raw_data(), A.layout.ld, B.tensor.raw_data(), B.layout.ld,
                  c.raw_data(), ldc, {}});
    return;
  }

  Shape batch = dims.batch;
  merge_batch_dims(batch, {&A.batch_strides, &B.batch_strides, &c_batch});
  if (batch.empty()) {  // a single product
    batch = {1};
    A.batch_strides = B.batch_strides = c_batch = {0};
  }
  // A strided batch over the last merged dim; a plain loop over the others.
  const size_t last = batch.size() - 1;
  const kernels::GemmBatch inner{batch[last], A.batch_strides[last], B.batch_strides[last], c_batch[last]};
  const int64_t outer = shape_numel(batch) / batch[last];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rest = o, off_a = 0, off_b = 0, off_c = 0;
    for (size_t d = last; d-- > 0;) {
      const int64_t i = rest % batch[d];
      rest /= batch[d];
      off_a += i * A.batch_strides[d];
      off_b += i * B.batch_strides[d];
      off_c += i * c_batch[d];
    }
    gemm(GemmCall{ta, tb, dims.M, dims.N, dims.K, byte_ptr(A.tensor) + off_a * in_bytes, A.layout.ld,
                  byte_ptr(B.tensor) + off_b * in_bytes, B.layout.ld,
                  static_cast<char*>(c.raw_data()) + off_c * c_bytes, ldc, inner});
  }
}

// C (+)= op(a) op(b) on the CPU, C in f32 for 16-bit operands.
void matmul_cpu(const Tensor& c, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                const MatmulDims& dims, bool accumulate) {
  const DType dtype = a.dtype();
  const double beta = accumulate ? 1.0 : 0.0;
  for_each_gemm(c, a, b, transpose_a, transpose_b, dims, [&](const GemmCall& g) {
    call_gemm(dtype, g.ta, g.tb, g.M, g.N, g.K, g.A, g.lda, g.B, g.ldb, beta, g.C, g.ldc, g.batch);
  });
}

#if FATHOM_WITH_CUDA
std::string describe(const kernels::GemmProblem& p) {
  return detail::concat(dtype_name(p.dtype), " M=", p.M, " N=", p.N, " K=", p.K, p.transpose_a ? " transpose_a" : "",
                        p.transpose_b ? " transpose_b" : "", " lda=", p.lda, " ldb=", p.ldb, " ldc=", p.ldc,
                        " batch=", p.batch);
}

// C (+)= op(a) op(b) through cuBLASLt, C in the operands' dtype.
void matmul_cuda(const Tensor& c, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                 const MatmulDims& dims, bool accumulate) {
  const int device = c.device().index;
  const size_t in_bytes = a.element_size(), c_bytes = c.element_size();
  for_each_gemm(c, a, b, transpose_a, transpose_b, dims, [&](const GemmCall& g) {
    kernels::GemmProblem p;
    p.dtype = a.dtype();
    p.transpose_a = g.ta;
    p.transpose_b = g.tb;
    p.M = g.M;
    p.N = g.N;
    p.K = g.K;
    p.lda = g.lda;
    p.ldb = g.ldb;
    p.ldc = g.ldc;
    p.accumulate = accumulate;
    p.allow_tf32 = p.dtype == DType::F32 && cuda::allow_tf32();  // one plan for 16-bit either way
    // Broadcast operands (batch stride 0) go one matrix at a time rather than relying on
    // cuBLASLt to accept a zero batch stride.
    const bool strided = g.batch.count > 1 && g.batch.stride_a != 0 && g.batch.stride_b != 0;
    const int64_t calls = strided ? 1 : g.batch.count;
    if (strided) {
      p.batch = g.batch.count;
      p.stride_a = g.batch.stride_a;
      p.stride_b = g.batch.stride_b;
      p.stride_c = g.batch.stride_c;
    }
    for (int64_t i = 0; i < calls; ++i) {
      kernels::GemmPointers ptrs;
      ptrs.a = static_cast<const char*>(g.A) + i * g.batch.stride_a * static_cast<int64_t>(in_bytes);
      ptrs.b = static_cast<const char*>(g.B) + i * g.batch.stride_b * static_cast<int64_t>(in_bytes);
      ptrs.c = static_cast<char*>(g.C) + i * g.batch.stride_c * static_cast<int64_t>(c_bytes);
      FATHOM_CHECK(kernels::gemm_cublaslt(p, ptrs, device, cuda::current_stream()), kOp,
                   ": cuBLASLt has no algorithm for the GEMM ", describe(p));
    }
  });
}
#endif

bool is_matmul_dtype(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16 || dtype == DType::F16;
}

}  // namespace

Shape matmul_shape(const Shape& a, const Shape& b, bool transpose_a, bool transpose_b) {
  MatmulDims dims = matmul_dims(a, b, transpose_a, transpose_b);
  Shape shape = dims.batch;
  shape.push_back(dims.M);
  shape.push_back(dims.N);
  return shape;
}

void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                 bool accumulate) {
  FATHOM_CHECK(out.defined() && a.defined() && b.defined(), kOp, ": undefined tensor");
  check_same_device(a, b, kOp);
  check_same_device(out, a, kOp);
  check_same_dtype(a, b, kOp);
  check_same_dtype(out, a, kOp);
  FATHOM_CHECK(is_matmul_dtype(a.dtype()), kOp, ": needs f32, f64, bf16 or f16 tensors, got ", dtype_name(a.dtype()),
               " (convert with .to(DType::F32) first)");
  const MatmulDims dims = matmul_dims(a.sizes(), b.sizes(), transpose_a, transpose_b);
  const Shape shape = matmul_shape(a.sizes(), b.sizes(), transpose_a, transpose_b);
  FATHOM_CHECK(out.sizes() == shape, kOp, ": shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
               " give a result of shape ", shape_str(shape), ", but the output has shape ", shape_str(out.sizes()));
  const bool on_cuda = !out.device().is_cpu();
  if (on_cuda) cuda::require_device(out.device().index);  // without the CUDA backend: throws
  if (out.numel() == 0) return;

  // Both GEMMs need a row-major C, and the CPU GEMM writes f32 for 16-bit operands (cuBLASLt
  // rounds to them itself). An output that qualifies is written directly; otherwise a staged
  // result is rounded into out once, at the end.
  const bool wide = !on_cuda && (a.dtype() == DType::BF16 || a.dtype() == DType::F16);
  const MatrixLayout out_layout = matrix_layout(out);
  const bool direct = !wide && out_layout.plain && !out_layout.transposed;
  Tensor c = out;
  if (!direct) {
    c = Tensor::empty(shape, wide ? DType::F32 : a.dtype(), out.device());
    if (accumulate) c.copy_(out);
  }
  if (dims.K == 0) {
    if (!accumulate) c.zero_();
  } else if (on_cuda) {
#if FATHOM_WITH_CUDA
    matmul_cuda(c, a, b, transpose_a, transpose_b, dims, accumulate);
#endif
  } else {
    matmul_cpu(c, a, b, transpose_a, transpose_b, dims, accumulate);
  }
  if (!direct) Tensor(out).copy_(c);  // out is a handle: copying it writes the same memory
  out.bump_version();
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  FATHOM_CHECK(a.defined() && b.defined(), kOp, ": undefined tensor");
  Tensor out = Tensor::empty(matmul_shape(a.sizes(), b.sizes(), transpose_a, transpose_b), a.dtype(), a.device());
  matmul_into(out, a, b, transpose_a, transpose_b);
  return out;
}

namespace cuda {
namespace {
std::atomic<bool>& tf32_flag() {
  static std::atomic<bool> flag = [] {
    const char* env = std::getenv("FATHOM_ALLOW_TF32");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return flag;
}
}  // namespace

void set_allow_tf32(bool allow) { tf32_flag().store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return tf32_flag().load(std::memory_order_relaxed); }
}  // namespace cuda

}  // namespace fathom
