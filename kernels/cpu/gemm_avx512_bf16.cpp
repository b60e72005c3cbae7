// AVX512_BF16 micro-kernel: vdpbf16ps multiplies 16 pairs of bf16 and adds each pair's sum to
// an f32 lane, so A and B are packed as bf16 pairs along k (kpack = 2): a broadcast 32-bit A
// pair times a zmm holding 16 columns x 2 k of B. Tile 12 x 32 as the f32 AVX-512 kernel,
// at twice the k per instruction and half the bytes per k. KC = 512 k values keeps the B
// micro-panel at 32 KiB. The instruction rounds its f32 result to nearest even and treats bf16
// denormals as zero, which the tolerance of bf16 results covers.
//
// Not run on the development machine (Zen 3 VM, no AVX-512); written from the shared
// micro-kernel template, whose packing and loop the other flavours test.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,fma")
#endif

#include "kernels/cpu/gemm_microkernel.h"

namespace fathom::kernels::gemm_detail {
namespace {

struct Avx512Bf16 {
  using Packed = BFloat16;
  using Acc = float;
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kPack = 2;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load_b(const BFloat16* p) { return _mm512_castsi512_ps(_mm512_loadu_si512(p)); }
  static Reg broadcast_a(const BFloat16* p) {
    int32_t pair;
    std::memcpy(&pair, p, sizeof pair);
    return _mm512_castsi512_ps(_mm512_set1_epi32(pair));
  }
  // a and b carry bf16 pairs in f32-sized lanes; acc is f32.
  static Reg madd(Reg a, Reg b, Reg acc) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_castps_si512(a), (__m512bh)_mm512_castps_si512(b));
  }
  static Reg load_c(const float* p) { return _mm512_loadu_ps(p); }
  static void store_c(float* p, Reg r) { _mm512_storeu_ps(p, r); }
  static Reg scale(Reg x, float s) { return _mm512_mul_ps(x, _mm512_set1_ps(s)); }
  static Reg scale_add(Reg x, float s, Reg c) { return _mm512_fmadd_ps(x, _mm512_set1_ps(s), c); }
};

void avx512_bf16_run(int64_t groups, const BFloat16* a, const BFloat16* b, float* c, int64_t ldc, float alpha,
                     float beta, int m, int n) {
  simd_micro_kernel<Avx512Bf16, 12, 2>(groups, a, b, c, ldc, alpha, beta, m, n);
}

}  // namespace
}  // namespace fathom::kernels::gemm_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace fathom::kernels::gemm_detail {

MicroKernel<BFloat16, float> avx512_bf16_kernel() {
  return {.mr = 12, .nr = 32, .kpack = 2, .mc = 144, .kc = 512, .nc = 1024, .run = avx512_bf16_run};
}

}  // namespace fathom::kernels::gemm_detail
