#pragma once
// Internal: f32/f64 GEMM through the peer libraries (Eigen, OpenBLAS), each compiled only when
// the build has it (FATHOM_GEMM_WITH_EIGEN / FATHOM_GEMM_WITH_OPENBLAS).

#include "kernels/cpu/gemm_blocked.h"

namespace fathom::kernels::gemm_detail {

void eigen_gemm(const GemmProblem<float, float>& problem, int threads);
void eigen_gemm(const GemmProblem<double, double>& problem, int threads);

void openblas_gemm(const GemmProblem<float, float>& problem, int threads);
void openblas_gemm(const GemmProblem<double, double>& problem, int threads);

}  // namespace fathom::kernels::gemm_detail
