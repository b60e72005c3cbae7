// AMX micro-kernel for bf16 (Intel Sapphire Rapids and later): TDPBF16PS multiplies a tile of
// 16 rows x 32 bf16 of A by a tile of 16 bf16 pairs x 16 columns of B into 16 x 16 f32
// accumulators, 16384 flops per instruction, about 20x the f32 AVX-512 FMA rate per core.
//
// The 32 x 32 C tile is four accumulator tiles (tmm0-3: rows 0-15/16-31 x columns 0-15/16-31)
// fed by two A tiles (tmm4-5) and two B tiles (tmm6-7) per 32-deep k group. The packing puts
// each operand in the layout a tile load reads with one stride:
//   A panel, 32 rows, interleave 32: per k group, row r's 32 values are 64 contiguous bytes, so
//     the two A tiles are rows 0-15 and 16-31 at a 64-byte stride;
//   B panel, 32 columns, interleave 2 (pairs, as vdpbf16ps): per k pair, 32 columns x 2 values,
//     so the two B tiles are columns 0-15 and 16-31 of 16 pairs at a 128-byte stride.
// The k order of each C element is fixed by the packing, never by the thread split. TDPBF16PS
// treats bf16 denormals as zero and rounds its f32 sums to nearest even, as vdpbf16ps does.
//
// Linux hands out the 8 KiB tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM), once
// per process; each thread loads the tile configuration before its first tile instruction.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cpuid.h>

#include <cstdint>

#include "kernels/cpu/gemm_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16,fma"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16,fma")
#endif

namespace fathom::kernels::gemm_detail {
namespace {

constexpr int kTile = 16;               // rows (and f32 columns) of a tile
constexpr int kGroup = 32;              // k values per tile product
constexpr int kTileBytes = 64;          // bytes per tile row
constexpr int kBPairStride = 32 * 2;    // bf16 elements between consecutive k pairs of a B panel

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kTile;
    config.bytes_per_row[t] = kTileBytes;
  }
  _tile_loadconfig(&config);
  configured = true;
}

void amx_bf16_run(int64_t groups, const BFloat16* a, const BFloat16* b, float* c, int64_t ldc, float alpha,
                  float beta, int m, int n) {
  configure_tiles();
  const int64_t c_stride = ldc * static_cast<int64_t>(sizeof(float));
  // A whole tile with alpha 1 and beta 0 or 1 is read and written in place; the rest goes
  // through a 32 x 32 buffer.
  const bool in_place = m == 2 * kTile && n == 2 * kTile && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  if (in_place && beta == 1.0f) {
    _tile_loadd(0, c, c_stride);
    _tile_loadd(1, c + kTile, c_stride);
    _tile_loadd(2, c + kTile * ldc, c_stride);
    _tile_loadd(3, c + kTile * ldc + kTile, c_stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t g = 0; g < groups; ++g) {
    const BFloat16* a_group = a + g * (2 * kTile) * kGroup;
    const BFloat16* b_group = b + g * (kGroup / 2) * kBPairStride;
    _tile_loadd(4, a_group, kTileBytes);
    _tile_loadd(5, a_group + kTile * kGroup, kTileBytes);
    _tile_loadd(6, b_group, kBPairStride * sizeof(BFloat16));
    _tile_loadd(7, b_group + 2 * kTile, kBPairStride * sizeof(BFloat16));
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (in_place) {
    _tile_stored(0, c, c_stride);
    _tile_stored(1, c + kTile, c_stride);
    _tile_stored(2, c + kTile * ldc, c_stride);
    _tile_stored(3, c + kTile * ldc + kTile, c_stride);
    return;
  }
  alignas(64) float acc[2 * kTile][2 * kTile];
  constexpr int64_t acc_stride = 2 * kTile * sizeof(float);
  _tile_stored(0, &acc[0][0], acc_stride);
  _tile_stored(1, &acc[0][kTile], acc_stride);
  _tile_stored(2, &acc[kTile][0], acc_stride);
  _tile_stored(3, &acc[kTile][kTile], acc_stride);
  for (int i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (beta == 0.0f)
      for (int j = 0; j < n; ++j) row[j] = alpha * acc[i][j];
    else
      for (int j = 0; j < n; ++j) row[j] = alpha * acc[i][j] + beta * row[j];
  }
}

}  // namespace
}  // namespace fathom::kernels::gemm_detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace fathom::kernels::gemm_detail {

bool amx_bf16_usable() {
  static const bool usable = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool tile = edx & (1u << 24), bf16 = edx & (1u << 22);
    if (!tile || !bf16) return false;
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

MicroKernel<BFloat16, float> amx_bf16_kernel() {
  return {.mr = 32, .nr = 32, .kpack = 32, .b_interleave = 2, .mc = 256, .kc = 512, .nc = 512, .run = amx_bf16_run};
}

}  // namespace fathom::kernels::gemm_detail
