// Portable micro-kernels: GCC/Clang vector extensions in 16-byte vectors, compiled for the
// library's baseline (FATHOM_CPU_BASELINE; SSE2 with plain x86-64, NEON on Arm), no explicit
// FMA. The fallback for CPUs without AVX2, and the flavour tests compare the others with.
// f32 tile 6 x 8, f64 tile 6 x 4: 12 accumulators + 2 B + 1 broadcast fit the 16 baseline
// vector registers.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/gemm_microkernel.h"

namespace fathom::kernels::gemm_detail {
namespace {

using F32x4 = float __attribute__((vector_size(16)));
using F64x2 = double __attribute__((vector_size(16)));

template <typename T, typename Vector>
struct PortableSimd {
  using Packed = T;
  using Acc = T;
  using Reg = Vector;
  static constexpr int kLanes = sizeof(Vector) / sizeof(T);
  static constexpr int kPack = 1;

  static Reg zero() { return Reg{}; }
  static Reg load(const T* p) {
    Reg r;
    std::memcpy(&r, p, sizeof r);  // unaligned-safe load
    return r;
  }
  static Reg load_b(const T* p) { return load(p); }
  static Reg broadcast_a(const T* p) { return Reg{} + *p; }
  static Reg madd(Reg a, Reg b, Reg acc) { return acc + a * b; }
  static Reg load_c(const T* p) { return load(p); }
  static void store_c(T* p, Reg r) { std::memcpy(p, &r, sizeof r); }
  static Reg scale(Reg x, T s) { return x * s; }
  static Reg scale_add(Reg x, T s, Reg c) { return x * s + c; }
};

// Emulates vdpbf16ps (acc + a.lo * b.lo + a.hi * b.hi per f32 lane, on bf16 pairs carried in
// f32-sized lanes) so tests can check the bf16 pair packing on CPUs without AVX512_BF16.
struct PortableBf16Pairs {
  using Packed = BFloat16;
  using Acc = float;
  using Reg = F32x4;
  using Bits = uint32_t __attribute__((vector_size(16)));
  static constexpr int kLanes = 4;
  static constexpr int kPack = 2;

  static Reg from_bits(Bits bits) {
    Reg r;
    std::memcpy(&r, &bits, sizeof r);
    return r;
  }
  static Bits to_bits(Reg r) {
    Bits bits;
    std::memcpy(&bits, &r, sizeof bits);
    return bits;
  }
  static Reg zero() { return Reg{}; }
  static Reg load_b(const BFloat16* p) {
    Reg r;
    std::memcpy(&r, p, sizeof r);
    return r;
  }
  static Reg broadcast_a(const BFloat16* p) {
    uint32_t pair;
    std::memcpy(&pair, p, sizeof pair);
    return from_bits(Bits{} + pair);
  }
  static Reg madd(Reg a, Reg b, Reg acc) {
    const Bits x = to_bits(a), y = to_bits(b);
    const Bits high = Bits{} + 0xffff0000u;
    return acc + from_bits(x << 16) * from_bits(y << 16) + from_bits(x & high) * from_bits(y & high);
  }
  static Reg load_c(const float* p) {
    Reg r;
    std::memcpy(&r, p, sizeof r);
    return r;
  }
  static void store_c(float* p, Reg r) { std::memcpy(p, &r, sizeof r); }
  static Reg scale(Reg x, float s) { return x * s; }
  static Reg scale_add(Reg x, float s, Reg c) { return x * s + c; }
};

void portable_bf16_pair_run(int64_t groups, const BFloat16* a, const BFloat16* b, float* c, int64_t ldc, float alpha,
                            float beta, int m, int n) {
  simd_micro_kernel<PortableBf16Pairs, 6, 2>(groups, a, b, c, ldc, alpha, beta, m, n);
}

// tile rows/columns 32, k group 32: A at [g][row][32 k], B at [g][16 pairs][32 columns][2].
void portable_amx_layout_run(int64_t groups, const BFloat16* a, const BFloat16* b, float* c, int64_t ldc,
                             float alpha, float beta, int m, int n) {
  constexpr int kTile = 32, kGroup = 32;
  float acc[kTile][kTile] = {};
  for (int64_t g = 0; g < groups; ++g) {
    const BFloat16* a_group = a + g * kTile * kGroup;
    const BFloat16* b_group = b + g * kGroup * kTile;
    for (int i = 0; i < kTile; ++i)
      for (int j = 0; j < kTile; ++j)
        for (int q = 0; q < kGroup / 2; ++q) {
          const BFloat16* a_pair = a_group + i * kGroup + 2 * q;
          const BFloat16* b_pair = b_group + (q * kTile + j) * 2;
          acc[i][j] += static_cast<float>(a_pair[0]) * static_cast<float>(b_pair[0]) +
                       static_cast<float>(a_pair[1]) * static_cast<float>(b_pair[1]);
        }
  }
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      c[i * ldc + j] = alpha * acc[i][j] + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
}

using PortableF32 = PortableSimd<float, F32x4>;
using PortableF64 = PortableSimd<double, F64x2>;

void portable_f32_run(int64_t groups, const float* a, const float* b, float* c, int64_t ldc, float alpha, float beta,
                      int m, int n) {
  simd_micro_kernel<PortableF32, 6, 2>(groups, a, b, c, ldc, alpha, beta, m, n);
}

void portable_f64_run(int64_t groups, const double* a, const double* b, double* c, int64_t ldc, double alpha,
                      double beta, int m, int n) {
  simd_micro_kernel<PortableF64, 6, 2>(groups, a, b, c, ldc, alpha, beta, m, n);
}

}  // namespace

MicroKernel<float, float> portable_f32_kernel() {
  return {.mr = 6, .nr = 8, .kpack = 1, .mc = 120, .kc = 256, .nc = 2048, .run = portable_f32_run};
}

MicroKernel<BFloat16, float> portable_bf16_pair_kernel() {
  return {.mr = 6, .nr = 8, .kpack = 2, .mc = 120, .kc = 512, .nc = 2048, .run = portable_bf16_pair_run};
}

// Small blocks, so that tests cross k blocks and leave the packed-A-stays path with few rows.
MicroKernel<BFloat16, float> portable_amx_layout_kernel() {
  return {.mr = 32, .nr = 32, .kpack = 32, .b_interleave = 2, .mc = 64, .kc = 64, .nc = 96,
          .run = portable_amx_layout_run};
}

MicroKernel<double, double> portable_f64_kernel() {
  return {.mr = 6, .nr = 4, .kpack = 1, .mc = 72, .kc = 256, .nc = 2048, .run = portable_f64_run};
}

}  // namespace fathom::kernels::gemm_detail
