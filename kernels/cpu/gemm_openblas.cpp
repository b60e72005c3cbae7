// f32/f64 GEMM through OpenBLAS's cblas (Debian's libopenblas; its own thread pool, sized per
// call). cblas takes int dimensions; the dispatcher has checked that they fit.
#include <cblas.h>

#include "kernels/cpu/gemm_peers.h"

namespace fathom::kernels::gemm_detail {
namespace {

CBLAS_TRANSPOSE transpose_flag(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

void openblas_gemm(const GemmProblem<float, float>& p, int threads) {
  openblas_set_num_threads(threads);
  cblas_sgemm(CblasRowMajor, transpose_flag(p.trans_a), transpose_flag(p.trans_b), int(p.M), int(p.N), int(p.K),
              p.alpha, p.A, int(p.lda), p.B, int(p.ldb), p.beta, p.C, int(p.ldc));
}

void openblas_gemm(const GemmProblem<double, double>& p, int threads) {
  openblas_set_num_threads(threads);
  cblas_dgemm(CblasRowMajor, transpose_flag(p.trans_a), transpose_flag(p.trans_b), int(p.M), int(p.N), int(p.K),
              p.alpha, p.A, int(p.lda), p.B, int(p.ldb), p.beta, p.C, int(p.ldc));
}

}  // namespace fathom::kernels::gemm_detail
