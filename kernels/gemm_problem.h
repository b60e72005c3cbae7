#pragma once
// The GEMMs of the matmul and linear ops as they lie in row-major memory, and their translation
// to cuBLASLt's column-major convention (kernels/cuda/gemm_cublaslt.cpp). Plain host code with no
// CUDA include, so the mapping, the checks and the plan-cache key are tested on the CPU.
//
// A row-major r x c matrix with leading dim ld (>= c) is, read column-major, its c x r transpose
// with the same ld. So C = op(A) op(B) on row-major memory is C^T = op(B)^T op(A)^T on
// column-major memory: cuBLASLt's A is our B and its B is our A, with the same transpose flags,
// m = N and n = M; no data moves.

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace fathom::kernels {

// What the GEMM does after the product, in row-major terms. bias has N values (one per output
// column) for Bias/Gelu*; aux is an M x N row-major matrix (leading dim ldaux) of pre-activations.
enum class GemmEpilogue : uint8_t {
  None,
  Bias,      // C = op(A) op(B) + bias
  Gelu,      // aux = op(A) op(B); C = gelu_tanh(aux)
  GeluBias,  // aux = op(A) op(B) + bias; C = gelu_tanh(aux)
  BiasGrad,  // C = op(A) op(B); bias[m] = sum over k of op(A)[m][k] (M values: the dbias of dW = dy^T x)
};

// C[i] (+)= op(A[i]) op(B[i]) for i < batch. A is stored M x K (K x M when transpose_a) with rows
// lda apart, B is stored K x N (N x K when transpose_b) with rows ldb apart, C is M x N with rows
// ldc apart; consecutive batch matrices are stride_* elements apart. All of A, B, C (and bias,
// aux) have dtype `dtype`; f16/bf16 accumulate in f32 and round once on store.
struct GemmProblem {
  DType dtype = DType::F32;
  bool transpose_a = false, transpose_b = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool accumulate = false;  // C += product (beta = 1) instead of C = product
  bool allow_tf32 = false;  // f32 only: TF32 tensor cores (10-bit mantissa products)
  GemmEpilogue epilogue = GemmEpilogue::None;
  int64_t ldaux = 0;  // Gelu/GeluBias only
};

// The stored columns of a row-major operand: its leading dim must be at least this.
constexpr int64_t stored_cols_a(const GemmProblem& p) { return p.transpose_a ? p.M : p.K; }
constexpr int64_t stored_cols_b(const GemmProblem& p) { return p.transpose_b ? p.K : p.N; }

// One stored matrix as cuBLASLt describes it: column-major rows x cols, columns ld apart.
struct LtMatrix {
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch_stride = 0;
  bool operator==(const LtMatrix&) const = default;
};

struct LtGemm {
  bool transpose_a = false, transpose_b = false;  // cuBLASLt's op flags (its A is our B)
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  LtMatrix a, b, c;  // c also describes D (written in place)
  LtMatrix aux;      // like c, with ldaux (Gelu/GeluBias)
  int64_t bias_length = 0;  // D's rows (bias) or columns (bias gradient); 0 without
};

constexpr LtMatrix lt_matrix(int64_t stored_rows, int64_t stored_cols, int64_t ld, int64_t batch_stride) {
  return {stored_cols, stored_rows, ld, batch_stride};  // row-major r x c read column-major: c x r
}

constexpr LtGemm to_column_major(const GemmProblem& p) {
  LtGemm g;
  g.transpose_a = p.transpose_b;
  g.transpose_b = p.transpose_a;
  g.m = p.N;
  g.n = p.M;
  g.k = p.K;
  g.batch = p.batch;
  g.a = lt_matrix(p.transpose_b ? p.N : p.K, stored_cols_b(p), p.ldb, p.stride_b);
  g.b = lt_matrix(p.transpose_a ? p.K : p.M, stored_cols_a(p), p.lda, p.stride_a);
  g.c = lt_matrix(p.M, p.N, p.ldc, p.stride_c);
  const bool gelu = p.epilogue == GemmEpilogue::Gelu || p.epilogue == GemmEpilogue::GeluBias;
  if (gelu) g.aux = lt_matrix(p.M, p.N, p.ldaux, 0);  // epilogues are unbatched
  switch (p.epilogue) {
    case GemmEpilogue::Bias:
    case GemmEpilogue::GeluBias: g.bias_length = p.N; break;  // one per row of D (= column of C)
    case GemmEpilogue::BiasGrad: g.bias_length = p.M; break;  // one per column of D, summed over k
    default: g.bias_length = 0;
  }
  return g;
}

// cuBLASLt takes sizes and leading dims as 32-bit values in practice.
inline constexpr int64_t kGemmMaxDim = (int64_t{1} << 31) - 1;

// "" when the problem is well formed for cuBLASLt, else what is wrong with it.
inline std::string gemm_problem_error(const GemmProblem& p) {
  auto text = [](const char* name, int64_t value) { return std::string(name) + " = " + std::to_string(value); };
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return "empty GEMM (M, N, K must be positive): " + text("M", p.M) + ", " +
                                                 text("N", p.N) + ", " + text("K", p.K);
  if (p.batch < 1) return "batch must be at least 1, got " + std::to_string(p.batch);
  const int64_t cols_a = stored_cols_a(p), cols_b = stored_cols_b(p);
  if (p.lda < cols_a) return text("lda", p.lda) + " is less than A's stored columns (" + std::to_string(cols_a) + ")";
  if (p.ldb < cols_b) return text("ldb", p.ldb) + " is less than B's stored columns (" + std::to_string(cols_b) + ")";
  if (p.ldc < p.N) return text("ldc", p.ldc) + " is less than N (" + std::to_string(p.N) + ")";
  for (int64_t v : {p.M, p.N, p.K, p.lda, p.ldb, p.ldc, p.batch, p.ldaux})
    if (v > kGemmMaxDim) return "a size or leading dim beyond 2^31 - 1 (" + std::to_string(v) + ")";
  const bool gelu = p.epilogue == GemmEpilogue::Gelu || p.epilogue == GemmEpilogue::GeluBias;
  if (gelu && p.ldaux < p.N) return text("ldaux", p.ldaux) + " is less than N (" + std::to_string(p.N) + ")";
  if (p.epilogue != GemmEpilogue::None && p.batch != 1) return "epilogues are for single (unbatched) GEMMs";
  return "";
}

// Whether an epilogue problem meets cuBLASLt's documented constraints; when not, the caller does
// the epilogue's work in separate passes. (The heuristic may still find no algorithm.)
constexpr bool gemm_epilogue_supported(const GemmProblem& p) {
  if (p.epilogue == GemmEpilogue::None) return true;
  if (p.batch != 1 || p.accumulate) return false;
  if (p.dtype == DType::F64) return false;  // f64 (tests, gradchecks) takes the plain path: no fusion needed
  const bool gelu = p.epilogue == GemmEpilogue::Gelu || p.epilogue == GemmEpilogue::GeluBias;
  return !gelu || p.ldaux % 8 == 0;  // the GELU input matrix's leading dim must be a multiple of 8
}

enum class GemmCompute : uint8_t { F32, F32FastTf32, F64 };

// f16/bf16 accumulate in f32; f32 in f32 unless TF32 is allowed; f64 in f64.
constexpr GemmCompute gemm_compute(DType dtype, bool allow_tf32) {
  if (dtype == DType::F64) return GemmCompute::F64;
  return dtype == DType::F32 && allow_tf32 ? GemmCompute::F32FastTf32 : GemmCompute::F32;
}

// The largest power of two (at most 256) dividing the address; 256 for null. cuBLASLt picks
// vectorised kernels from the pointers' alignment, so it is part of the plan's key.
constexpr uint32_t pointer_alignment(uintptr_t address) {
  if (address == 0) return 256;
  const uintptr_t lowest = address & (~address + 1);
  return lowest >= 256 ? 256u : static_cast<uint32_t>(lowest);
}

// The key of a cached cuBLASLt plan (descriptors + chosen algorithm): the whole problem and the
// alignment of every pointer it touches.
struct GemmKey {
  GemmProblem problem;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0, align_aux = 0;
  bool operator==(const GemmKey& o) const {
    const GemmProblem &p = problem, &q = o.problem;
    return p.dtype == q.dtype && p.transpose_a == q.transpose_a && p.transpose_b == q.transpose_b && p.M == q.M &&
           p.N == q.N && p.K == q.K && p.lda == q.lda && p.ldb == q.ldb && p.ldc == q.ldc && p.batch == q.batch &&
           p.stride_a == q.stride_a && p.stride_b == q.stride_b && p.stride_c == q.stride_c &&
           p.accumulate == q.accumulate && p.allow_tf32 == q.allow_tf32 && p.epilogue == q.epilogue &&
           p.ldaux == q.ldaux && align_a == o.align_a && align_b == o.align_b && align_c == o.align_c &&
           align_bias == o.align_bias && align_aux == o.align_aux;
  }
};

inline GemmKey gemm_key(const GemmProblem& p, const void* a, const void* b, const void* c, const void* bias,
                        const void* aux) {
  auto align = [](const void* ptr) { return pointer_alignment(reinterpret_cast<uintptr_t>(ptr)); };
  return {p, align(a), align(b), align(c), align(bias), align(aux)};
}

struct GemmKeyHash {
  size_t operator()(const GemmKey& key) const {
    const GemmProblem& p = key.problem;
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    auto mix = [&h](uint64_t v) {
      for (int byte = 0; byte < 8; ++byte) {
        h ^= (v >> (8 * byte)) & 0xff;
        h *= 1099511628211ull;
      }
    };
    for (int64_t v : {p.M, p.N, p.K, p.lda, p.ldb, p.ldc, p.batch, p.stride_a, p.stride_b, p.stride_c, p.ldaux})
      mix(static_cast<uint64_t>(v));
    mix(static_cast<uint64_t>(p.dtype) | uint64_t{p.transpose_a} << 8 | uint64_t{p.transpose_b} << 9 |
        uint64_t{p.accumulate} << 10 | uint64_t{p.allow_tf32} << 11 | uint64_t(p.epilogue) << 16);
    mix(uint64_t{key.align_a} | uint64_t{key.align_b} << 16 | uint64_t{key.align_c} << 32 |
        uint64_t{key.align_bias} << 48);
    mix(key.align_aux);
    return static_cast<size_t>(h);
  }
};

}  // namespace fathom::kernels
