// f32/f64 GEMM through Eigen's own blocked product (header-only; OpenMP threads, set per call).
// Row-major maps with an outer stride give any lda; transposes are Eigen views, no copies.
#include <Eigen/Core>

#include "kernels/cpu/gemm_peers.h"

namespace fathom::kernels::gemm_detail {
namespace {

template <typename T>
void eigen_gemm_impl(const GemmProblem<T, T>& p, int threads) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;
  using Map = Eigen::Map<Matrix, Eigen::Unaligned, Eigen::OuterStride<>>;
  const ConstMap a(p.A, p.trans_a ? p.K : p.M, p.trans_a ? p.M : p.K, Eigen::OuterStride<>(p.lda));
  const ConstMap b(p.B, p.trans_b ? p.N : p.K, p.trans_b ? p.K : p.N, Eigen::OuterStride<>(p.ldb));
  Map c(p.C, p.M, p.N, Eigen::OuterStride<>(p.ldc));
  Eigen::setNbThreads(threads);
  auto run = [&](const auto& op_a, const auto& op_b) {
    if (p.beta == T(0)) {
      c.noalias() = p.alpha * op_a * op_b;  // assigns: never reads C
    } else {
      if (p.beta != T(1)) c *= p.beta;
      c.noalias() += p.alpha * op_a * op_b;
    }
  };
  if (p.trans_a && p.trans_b)
    run(a.transpose(), b.transpose());
  else if (p.trans_a)
    run(a.transpose(), b);
  else if (p.trans_b)
    run(a, b.transpose());
  else
    run(a, b);
}

}  // namespace

void eigen_gemm(const GemmProblem<float, float>& problem, int threads) { eigen_gemm_impl(problem, threads); }
void eigen_gemm(const GemmProblem<double, double>& problem, int threads) { eigen_gemm_impl(problem, threads); }

}  // namespace fathom::kernels::gemm_detail
