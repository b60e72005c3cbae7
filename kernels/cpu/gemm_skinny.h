#pragma once
// C = alpha * A * B^T + beta * C for a few rows of A (M <= kSkinnyRows) and B given as rows
// (B^T's layout: a linear layer's weight [N, K]): the shape of token-by-token generation, where
// packing B for the blocked GEMM would cost more than the product (packing reads each weight
// once per call for a handful of rows). Each output is a dot product over K read straight from
// the rows; every output is computed by one thread in one order, so the result is the same bits
// at every thread count and on every ISA.

#include <cstdint>

namespace fathom::kernels::gemm_detail {

inline constexpr int64_t kSkinnyRows = 16;

void skinny_gemm_nt(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                    int64_t ldb, float beta, float* C, int64_t ldc, int threads);

}  // namespace fathom::kernels::gemm_detail
