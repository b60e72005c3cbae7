#include "kernels/cpu/gemm_skinny.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FATHOM_SKINNY_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FATHOM_SKINNY_CLONES
#endif

namespace fathom::kernels::gemm_detail {
namespace {

// Sixteen lanes whatever the ISA (one AVX-512 register, two AVX2 ones): each lane's sum runs in
// the same order everywhere, and so does the fixed tree that adds the lanes at the end, so the
// result does not depend on which clone runs.
using Lanes = float __attribute__((vector_size(64)));
constexpr int kLanes = 16;
constexpr int kRowBlock = 4, kColBlock = 4;  // 16 accumulators + 8 loads: within AVX-512's 32 registers

inline Lanes load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float lane_sum(Lanes v) {
  using Half = float __attribute__((vector_size(32)));
  using Quarter = float __attribute__((vector_size(16)));
  const Half h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Quarter q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// C[r, c] for r < Rows, c < Cols: dot products of A's rows with B's rows over K.
template <int Rows, int Cols>
__attribute__((always_inline)) inline void block(int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                                                 int64_t ldb, float beta, float* C, int64_t ldc) {
  Lanes acc[Rows][Cols] = {};
  const int64_t vector_end = K / kLanes * kLanes;
  for (int64_t k = 0; k < vector_end; k += kLanes) {
    Lanes a[Rows], b[Cols];
    for (int r = 0; r < Rows; ++r) a[r] = load(A + r * lda + k);
    for (int c = 0; c < Cols; ++c) b[c] = load(B + c * ldb + k);
    for (int r = 0; r < Rows; ++r)
      for (int c = 0; c < Cols; ++c) acc[r][c] += a[r] * b[c];
  }
  for (int r = 0; r < Rows; ++r)
    for (int c = 0; c < Cols; ++c) {
      float sum = lane_sum(acc[r][c]);
      for (int64_t k = vector_end; k < K; ++k) sum += A[r * lda + k] * B[c * ldb + k];
      float& out = C[r * ldc + c];
      out = beta == 0 ? alpha * sum : alpha * sum + beta * out;
    }
}

// Every row of A against the weight rows [j, j + Cols): A (a few rows) stays in L1 while each
// weight row is read from memory once per call.
template <int Cols>
__attribute__((always_inline)) inline void column_block(int64_t M, int64_t K, float alpha, const float* A, int64_t lda,
                                                        const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  int64_t i = 0;
  for (; i + kRowBlock <= M; i += kRowBlock)
    block<kRowBlock, Cols>(K, alpha, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc);
  for (; i < M; ++i) block<1, Cols>(K, alpha, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc);
}

FATHOM_SKINNY_CLONES void nt_columns(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha, const float* A,
                                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  int64_t j = j0;
  for (; j + kColBlock <= j1; j += kColBlock)
    column_block<kColBlock>(M, K, alpha, A, lda, B + j * ldb, ldb, beta, C + j, ldc);
  for (; j < j1; ++j) column_block<1>(M, K, alpha, A, lda, B + j * ldb, ldb, beta, C + j, ldc);
}

// C[:, j0:j1] = alpha * A B + beta C with B's rows contiguous over N: each output row is a sum of
// B's rows scaled by A's entries, in k order.
FATHOM_SKINNY_CLONES void nn_columns(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha, const float* A,
                                     int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    const float* a = A + i * lda;
    for (int64_t j = j0; j < j1; ++j) c[j] = beta == 0 ? 0.0f : beta * c[j];
    for (int64_t k = 0; k < K; ++k) {
      const float scale = alpha * a[k];
      const float* b = B + k * ldb;
      for (int64_t j = j0; j < j1; ++j) c[j] += scale * b[j];
    }
  }
}

using Columns = void (*)(int64_t, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
                         float*, int64_t);

// Columns are split in whole blocks (about 64K multiply-adds per thread before another pays for
// waking up), so a thread count changes who computes an output, never how.
void split_columns(Columns columns, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                   const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int threads, int64_t block) {
  const int64_t blocks = (N + block - 1) / block;
  const int team = static_cast<int>(std::clamp<int64_t>(M * N * K / 65536, 1, std::min<int64_t>(threads, blocks)));
  if (team == 1) return columns(M, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#pragma omp parallel num_threads(team)
  {
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t j0 = std::min(N, blocks * t / n * block), j1 = std::min(N, blocks * (t + 1) / n * block);
    if (j0 < j1) columns(M, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

}  // namespace

void skinny_gemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                    int64_t ldb, float beta, float* C, int64_t ldc, int threads) {
  split_columns(nt_columns, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads, kColBlock);
}

void skinny_gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                    int64_t ldb, float beta, float* C, int64_t ldc, int threads) {
  split_columns(nn_columns, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads, kLanes);
}

}  // namespace fathom::kernels::gemm_detail
