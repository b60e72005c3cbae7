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

// Eight lanes on every ISA (one AVX2 register): the order of the sums does not depend on which
// clone runs.
using Lanes = float __attribute__((vector_size(32)));
constexpr int kLanes = 8;
constexpr int kRowBlock = 2, kColBlock = 4;  // 8 accumulators + 6 loads fit AVX2's 16 registers

inline Lanes load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float lane_sum(Lanes v) {
  float s = 0;
  for (int l = 0; l < kLanes; ++l) s += v[l];
  return s;
}

// Rows [i0, i0 + rows) x columns [j0, j0 + cols) of C, rows <= kRowBlock, cols <= kColBlock.
template <int Rows, int Cols>
inline void block(int64_t K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc) {
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

template <int Rows>
inline void row_block(int64_t j0, int64_t j1, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                      int64_t ldb, float beta, float* C, int64_t ldc) {
  int64_t j = j0;
  for (; j + kColBlock <= j1; j += kColBlock) block<Rows, kColBlock>(K, alpha, A, lda, B + j * ldb, ldb, beta, C + j, ldc);
  for (; j < j1; ++j) block<Rows, 1>(K, alpha, A, lda, B + j * ldb, ldb, beta, C + j, ldc);
}

FATHOM_SKINNY_CLONES void columns(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha, const float* A,
                                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  int64_t i = 0;
  for (; i + kRowBlock <= M; i += kRowBlock)
    row_block<kRowBlock>(j0, j1, K, alpha, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc);
  for (; i < M; ++i) row_block<1>(j0, j1, K, alpha, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc);
}

}  // namespace

void skinny_gemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                    int64_t ldb, float beta, float* C, int64_t ldc, int threads) {
  // About 64K multiply-adds per thread before another pays for waking up; columns are split in
  // whole blocks, so a thread count changes who computes an output, never how.
  const int64_t column_blocks = (N + kColBlock - 1) / kColBlock;
  const int team = static_cast<int>(std::clamp<int64_t>(M * N * K / 65536, 1, std::min<int64_t>(threads, column_blocks)));
  if (team == 1) return columns(M, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#pragma omp parallel num_threads(team)
  {
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t j0 = std::min(N, column_blocks * t / n * kColBlock);
    const int64_t j1 = std::min(N, column_blocks * (t + 1) / n * kColBlock);
    if (j0 < j1) columns(M, j0, j1, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

}  // namespace fathom::kernels::gemm_detail
