#pragma once
// CPU GEMM on raw pointers: C = alpha * op(A) * op(B) + beta * C, all matrices row-major.
//
// op(A) is M x K (A itself is K x M when trans_a), op(B) is K x N (B is N x K when trans_b);
// lda/ldb/ldc are the row strides in elements of the matrices as stored. beta == 0 ignores C's
// old contents (NaN or Inf there do not leak into the result). 16-bit operands (bf16, f16)
// accumulate in f32 and write f32 C. Which implementation runs is a build option
// (FATHOM_CPU_GEMM) for f32 and f64; 16-bit operands always use Fathom's own kernels (vdpbf16ps
// where the CPU has it). With the own kernels results are bit-identical for any thread count
// (threads split M and N, never K); Eigen and OpenBLAS pick blockings by thread count, so their
// f32/f64 results can vary in the last bits with it.
//
// The strided-batched variants compute `batch` independent GEMMs; matrix b of an operand
// starts at `b * stride` elements from its base pointer, and a stride of 0 broadcasts one
// matrix to every batch (C's stride must not be 0 unless batch is 1).

#include <cstdint>

#include "core/half.h"

namespace fathom::kernels {

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
              int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc);
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
               int64_t lda, const BFloat16* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_f16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const Half* A, int64_t lda,
              const Half* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Per-operand distances between consecutive matrices of a batch, in elements.
struct GemmBatch {
  int64_t count = 1;
  int64_t stride_a = 0;
  int64_t stride_b = 0;
  int64_t stride_c = 0;
};

void gemm_batched_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                      const GemmBatch& batch);
void gemm_batched_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                      int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
                      const GemmBatch& batch);
void gemm_batched_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
                       int64_t lda, const BFloat16* B, int64_t ldb, float beta, float* C, int64_t ldc,
                       const GemmBatch& batch);
void gemm_batched_f16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const Half* A,
                      int64_t lda, const Half* B, int64_t ldb, float beta, float* C, int64_t ldc,
                      const GemmBatch& batch);

}  // namespace fathom::kernels
