// AVX-512 micro-kernels for f32 and f64 (Zen 4, Skylake-SP and later). Tile 12 x 32 (f32) and
// 12 x 16 (f64): 24 accumulators + 2 B vectors + 1 broadcast of the 32 zmm registers, so each
// k step issues 24 FMAs for 14 loads. Blocks as the AVX2 flavour (KC = 256: a 32 KiB B
// micro-panel; MC = 144; NC = 1024). Accumulation is FMA in k order.
//
// Written from the shared micro-kernel template and the AVX2 flavour's tested loop; the
// development machine (Zen 3 VM) has no AVX-512, so these blocks are not yet tuned by
// measurement.
#include <immintrin.h>

#include "kernels/cpu/gemm_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
#endif

#include "kernels/cpu/gemm_microkernel.h"

namespace fathom::kernels::gemm_detail {
namespace {

struct Avx512F32 {
  using Packed = float;
  using Acc = float;
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kPack = 1;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load_b(const float* p) { return _mm512_loadu_ps(p); }
  static Reg broadcast_a(const float* p) { return _mm512_set1_ps(*p); }
  static Reg madd(Reg a, Reg b, Reg acc) { return _mm512_fmadd_ps(a, b, acc); }
  static Reg load_c(const float* p) { return _mm512_loadu_ps(p); }
  static void store_c(float* p, Reg r) { _mm512_storeu_ps(p, r); }
  static Reg scale(Reg x, float s) { return _mm512_mul_ps(x, _mm512_set1_ps(s)); }
  static Reg scale_add(Reg x, float s, Reg c) { return _mm512_fmadd_ps(x, _mm512_set1_ps(s), c); }
};

struct Avx512F64 {
  using Packed = double;
  using Acc = double;
  using Reg = __m512d;
  static constexpr int kLanes = 8;
  static constexpr int kPack = 1;
  static Reg zero() { return _mm512_setzero_pd(); }
  static Reg load_b(const double* p) { return _mm512_loadu_pd(p); }
  static Reg broadcast_a(const double* p) { return _mm512_set1_pd(*p); }
  static Reg madd(Reg a, Reg b, Reg acc) { return _mm512_fmadd_pd(a, b, acc); }
  static Reg load_c(const double* p) { return _mm512_loadu_pd(p); }
  static void store_c(double* p, Reg r) { _mm512_storeu_pd(p, r); }
  static Reg scale(Reg x, double s) { return _mm512_mul_pd(x, _mm512_set1_pd(s)); }
  static Reg scale_add(Reg x, double s, Reg c) { return _mm512_fmadd_pd(x, _mm512_set1_pd(s), c); }
};

void avx512_f32_run(int64_t groups, const float* a, const float* b, float* c, int64_t ldc, float alpha, float beta,
                    int m, int n) {
  simd_micro_kernel<Avx512F32, 12, 2>(groups, a, b, c, ldc, alpha, beta, m, n);
}

void avx512_f64_run(int64_t groups, const double* a, const double* b, double* c, int64_t ldc, double alpha,
                    double beta, int m, int n) {
  simd_micro_kernel<Avx512F64, 12, 2>(groups, a, b, c, ldc, alpha, beta, m, n);
}

}  // namespace
}  // namespace fathom::kernels::gemm_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace fathom::kernels::gemm_detail {

MicroKernel<float, float> avx512_f32_kernel() {
  return {.mr = 12, .nr = 32, .kpack = 1, .mc = 144, .kc = 256, .nc = 1024, .run = avx512_f32_run};
}

MicroKernel<double, double> avx512_f64_kernel() {
  return {.mr = 12, .nr = 16, .kpack = 1, .mc = 72, .kc = 256, .nc = 1024, .run = avx512_f64_run};
}

}  // namespace fathom::kernels::gemm_detail
