#pragma once
// GEMMs with a few rows of A (M <= kSkinnyRows), the shape of token-by-token generation, where
// packing B for the blocked GEMM costs more than the product (it reads all of B once per call
// for a handful of rows). B is read in place instead:
//   skinny_gemm_nt: C = alpha * A * B^T + beta * C, B given as rows ([N, K], a linear layer's
//                   weight): each output a dot product over K;
//   skinny_gemm_nn: C = alpha * A * B + beta * C, B [K, N] row-major (attention's weights times
//                   values): each output row a sum of B's rows in k order.
// Every output is computed by one thread in one order, so the result is the same bits at every
// thread count and on every ISA.

#include <cstdint>

namespace fathom::kernels::gemm_detail {

inline constexpr int64_t kSkinnyRows = 16;

void skinny_gemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                    int64_t ldb, float beta, float* C, int64_t ldc, int threads);
void skinny_gemm_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                    int64_t ldb, float beta, float* C, int64_t ldc, int threads);

}  // namespace fathom::kernels::gemm_detail
