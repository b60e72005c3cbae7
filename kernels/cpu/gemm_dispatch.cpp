// The public GEMM entry points (gemm.h): argument checks, the cases that need no product
// (empty, K == 0, alpha == 0), batching, and the choice of backend and kernel flavour.
#include <omp.h>

#include <algorithm>
#include <climits>
#include <type_traits>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_backend.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/gemm_peers.h"

namespace fathom::kernels {
namespace {

using gemm_detail::GemmProblem;

template <typename In, typename Acc>
void check_problem(const GemmProblem<In, Acc>& p, const char* name) {
  FATHOM_CHECK(p.M >= 0 && p.N >= 0 && p.K >= 0, name, ": negative size M=", p.M, " N=", p.N, " K=", p.K);
  // Stored shapes: A is M x K (K x M when transposed), B is K x N (N x K when transposed).
  const int64_t a_cols = p.trans_a ? p.M : p.K, b_cols = p.trans_b ? p.K : p.N;
  FATHOM_CHECK(p.lda >= std::max<int64_t>(1, a_cols), name, ": lda ", p.lda, " is less than A's row length ",
               a_cols, " (A stored as [", p.trans_a ? p.K : p.M, ", ", a_cols, "])");
  FATHOM_CHECK(p.ldb >= std::max<int64_t>(1, b_cols), name, ": ldb ", p.ldb, " is less than B's row length ",
               b_cols, " (B stored as [", p.trans_b ? p.N : p.K, ", ", b_cols, "])");
  FATHOM_CHECK(p.ldc >= std::max<int64_t>(1, p.N), name, ": ldc ", p.ldc, " is less than C's row length ", p.N);
}

// C = beta * C when there is no product to add (K == 0 or alpha == 0), as BLAS defines it.
template <typename Acc>
void scale_c(int64_t M, int64_t N, Acc beta, Acc* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == Acc(0) ? Acc(0) : beta * C[i * ldc + j];
}

gemm_detail::MicroKernel<float, float> own_f32_kernel() {
  switch (gemm_isa()) {
    case GemmIsa::Amx:
    case GemmIsa::Avx512: return gemm_detail::avx512_f32_kernel();
    case GemmIsa::Avx2: return gemm_detail::avx2_f32_kernel();
    case GemmIsa::Portable: break;
  }
  return gemm_detail::portable_f32_kernel();
}

gemm_detail::MicroKernel<double, double> own_f64_kernel() {
  switch (gemm_isa()) {
    case GemmIsa::Amx:
    case GemmIsa::Avx512: return gemm_detail::avx512_f64_kernel();
    case GemmIsa::Avx2: return gemm_detail::avx2_f64_kernel();
    case GemmIsa::Portable: break;
  }
  return gemm_detail::portable_f64_kernel();
}

// Peers take int sizes; ours take int64_t.
template <typename T>
[[maybe_unused]] bool fits_int(const GemmProblem<T, T>& p) {
  for (int64_t v : {p.M, p.N, p.K, p.lda, p.ldb, p.ldc})
    if (v > INT_MAX) return false;
  return true;
}

template <typename T>
void run_full_precision(const GemmProblem<T, T>& p, int threads) {
  const GemmBackend backend = gemm_backend();
#if FATHOM_GEMM_WITH_EIGEN
  if (backend == GemmBackend::Eigen) return gemm_detail::eigen_gemm(p, threads);
#endif
#if FATHOM_GEMM_WITH_OPENBLAS
  if (backend == GemmBackend::OpenBlas && fits_int(p)) return gemm_detail::openblas_gemm(p, threads);
#endif
  (void)backend;
  if constexpr (std::is_same_v<T, float>)
    gemm_detail::blocked_gemm(own_f32_kernel(), p, threads);
  else
    gemm_detail::blocked_gemm(own_f64_kernel(), p, threads);
}

void run(const GemmProblem<float, float>& p, int threads) { run_full_precision(p, threads); }
void run(const GemmProblem<double, double>& p, int threads) { run_full_precision(p, threads); }

void run(const GemmProblem<BFloat16, float>& p, int threads) {
  if (gemm_isa() == GemmIsa::Amx)
    gemm_detail::blocked_gemm(gemm_detail::amx_bf16_kernel(), p, threads);
  else if (gemm_isa() == GemmIsa::Avx512 && gemm_has_bf16_dot())
    gemm_detail::blocked_gemm(gemm_detail::avx512_bf16_kernel(), p, threads);
  else  // widened to f32 while packing
    gemm_detail::blocked_gemm(own_f32_kernel(), p, threads);
}

void run(const GemmProblem<Half, float>& p, int threads) { gemm_detail::blocked_gemm(own_f32_kernel(), p, threads); }

// Whether a batch of small products runs faster one product per thread (own kernels only: the
// peers manage their own threads). About 4 MFLOP per product is where one product's internal
// split starts to pay.
template <typename In, typename Acc>
bool split_batch_across_threads(const GemmProblem<In, Acc>& p, int64_t count, int threads) {
  const bool own = !std::is_same_v<In, Acc> || gemm_backend() == GemmBackend::Own;
  const double flops = 2.0 * static_cast<double>(p.M) * static_cast<double>(p.N) * static_cast<double>(p.K);
  return own && threads > 1 && count > 1 && flops < 4e6 * threads;
}

template <typename In, typename Acc>
void gemm_batched(GemmProblem<In, Acc> p, const GemmBatch& batch, const char* name) {
  check_problem(p, name);
  FATHOM_CHECK(batch.count >= 0, name, ": negative batch count ", batch.count);
  FATHOM_CHECK(batch.count <= 1 || batch.stride_c != 0, name,
               ": C's batch stride is 0 for a batch of ", batch.count, " (the products would overwrite each other)");
  if (p.M == 0 || p.N == 0 || batch.count == 0) return;
  if (p.K == 0 || p.alpha == Acc(0)) {
    for (int64_t b = 0; b < batch.count; ++b) scale_c(p.M, p.N, p.beta, p.C + b * batch.stride_c, p.ldc);
    return;
  }
  const int threads = num_threads();
  auto product = [&](int64_t b) {
    GemmProblem<In, Acc> q = p;
    q.A += b * batch.stride_a;
    q.B += b * batch.stride_b;
    q.C += b * batch.stride_c;
    return q;
  };
  if (split_batch_across_threads(p, batch.count, threads)) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t b = 0; b < batch.count; ++b) run(product(b), 1);
    return;
  }
  for (int64_t b = 0; b < batch.count; ++b) run(product(b), threads);
}

template <typename In, typename Acc>
GemmProblem<In, Acc> problem(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Acc alpha, const In* A,
                             int64_t lda, const In* B, int64_t ldb, Acc beta, Acc* C, int64_t ldc) {
  return {trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
}

}  // namespace

void gemm_batched_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                      const GemmBatch& batch) {
  gemm_batched(problem(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), batch, "gemm_f32");
}

void gemm_batched_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                      int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
                      const GemmBatch& batch) {
  gemm_batched(problem(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), batch, "gemm_f64");
}

void gemm_batched_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
                       int64_t lda, const BFloat16* B, int64_t ldb, float beta, float* C, int64_t ldc,
                       const GemmBatch& batch) {
  gemm_batched(problem(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), batch, "gemm_bf16");
}

void gemm_batched_f16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const Half* A,
                      int64_t lda, const Half* B, int64_t ldb, float beta, float* C, int64_t ldc,
                      const GemmBatch& batch) {
  gemm_batched(problem(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), batch, "gemm_f16");
}

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_batched_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, GemmBatch{});
}

void gemm_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
              int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  gemm_batched_f64(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, GemmBatch{});
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
               int64_t lda, const BFloat16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_batched_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, GemmBatch{});
}

void gemm_f16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const Half* A, int64_t lda,
              const Half* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_batched_f16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, GemmBatch{});
}

}  // namespace fathom::kernels
