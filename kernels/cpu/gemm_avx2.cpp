// AVX2 + FMA micro-kernels (Zen 2/3, Haswell and later). f32 tile 6 x 16 and f64 tile 6 x 8:
// 12 accumulators + 2 B vectors + 1 broadcast = 15 of the 16 ymm registers. Blocks: KC = 256
// keeps a B micro-panel (16 KiB) in L1, MC = 144 keeps the A block (144 KiB) in L2 and
// NC = 1024 keeps the B block (1 MiB) in L3. KC 384 and NC 3072 measured no better on the GPT-2
// shapes (within the noise of a shared 2-core VM). Accumulation is f32 (f64) FMA in k order.
#include <immintrin.h>

#include "kernels/cpu/gemm_kernels.h"

// Everything from here on may use AVX2/FMA; the driver calls in only after a CPU check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/cpu/gemm_microkernel.h"

namespace fathom::kernels::gemm_detail {
namespace {

struct Avx2F32 {
  using Packed = float;
  using Acc = float;
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kPack = 1;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load_b(const float* p) { return _mm256_loadu_ps(p); }
  static Reg broadcast_a(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg madd(Reg a, Reg b, Reg acc) { return _mm256_fmadd_ps(a, b, acc); }
  static Reg load_c(const float* p) { return _mm256_loadu_ps(p); }
  static void store_c(float* p, Reg r) { _mm256_storeu_ps(p, r); }
  static Reg scale(Reg x, float s) { return _mm256_mul_ps(x, _mm256_set1_ps(s)); }
  static Reg scale_add(Reg x, float s, Reg c) { return _mm256_fmadd_ps(x, _mm256_set1_ps(s), c); }
};

struct Avx2F64 {
  using Packed = double;
  using Acc = double;
  using Reg = __m256d;
  static constexpr int kLanes = 4;
  static constexpr int kPack = 1;
  static Reg zero() { return _mm256_setzero_pd(); }
  static Reg load_b(const double* p) { return _mm256_loadu_pd(p); }
  static Reg broadcast_a(const double* p) { return _mm256_broadcast_sd(p); }
  static Reg madd(Reg a, Reg b, Reg acc) { return _mm256_fmadd_pd(a, b, acc); }
  static Reg load_c(const double* p) { return _mm256_loadu_pd(p); }
  static void store_c(double* p, Reg r) { _mm256_storeu_pd(p, r); }
  static Reg scale(Reg x, double s) { return _mm256_mul_pd(x, _mm256_set1_pd(s)); }
  static Reg scale_add(Reg x, double s, Reg c) { return _mm256_fmadd_pd(x, _mm256_set1_pd(s), c); }
};

void avx2_f32_run(int64_t groups, const float* a, const float* b, float* c, int64_t ldc, float alpha, float beta,
                  int m, int n) {
  simd_micro_kernel<Avx2F32, 6, 2>(groups, a, b, c, ldc, alpha, beta, m, n);
}

void avx2_f64_run(int64_t groups, const double* a, const double* b, double* c, int64_t ldc, double alpha,
                  double beta, int m, int n) {
  simd_micro_kernel<Avx2F64, 6, 2>(groups, a, b, c, ldc, alpha, beta, m, n);
}

}  // namespace
}  // namespace fathom::kernels::gemm_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace fathom::kernels::gemm_detail {

MicroKernel<float, float> avx2_f32_kernel() {
  return {.mr = 6, .nr = 16, .kpack = 1, .mc = 144, .kc = 256, .nc = 1024, .run = avx2_f32_run};
}

MicroKernel<double, double> avx2_f64_kernel() {
  return {.mr = 6, .nr = 8, .kpack = 1, .mc = 72, .kc = 256, .nc = 1024, .run = avx2_f64_run};
}

}  // namespace fathom::kernels::gemm_detail
