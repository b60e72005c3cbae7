#pragma once
// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. The output for (key, counter) depends on nothing else, so every
// element of a random tensor can be computed independently — by any thread, on any device —
// and the same seed gives the same numbers for every thread count and parallel layout.
//
// Fathom's counter layout: key = the 64-bit seed; counter = (64-bit element block, 64-bit
// stream offset). One "draw" (filling one tensor) uses one offset.
// Header-only and free of heavy includes so CUDA kernels use the very same code.

#include <cstdint>

#include "core/half.h"  // FATHOM_HOST_DEVICE

namespace fathom {

struct PhiloxWords {
  uint32_t w[4];
};

FATHOM_HOST_DEVICE inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

// The raw block function: 10 rounds over counter (c0..c3) with key (k0, k1).
FATHOM_HOST_DEVICE inline PhiloxWords philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                                   uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMul0, c0, hi0, lo0);
    philox_mulhilo(kMul1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return PhiloxWords{{c0, c1, c2, c3}};
}

// Four words for block `block` of stream `offset` under `seed`.
FATHOM_HOST_DEVICE inline PhiloxWords philox_block(uint64_t seed, uint64_t offset, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                       static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// One 32-bit word per element: element i reads word i % 4 of block i / 4.
FATHOM_HOST_DEVICE inline uint32_t philox_word(uint64_t seed, uint64_t offset, uint64_t index) {
  return philox_block(seed, offset, index >> 2).w[index & 3];
}

// Two words per element (f64 uniforms, normals, wide integers): element i reads words
// 2(i % 2), 2(i % 2) + 1 of block i / 2.
FATHOM_HOST_DEVICE inline uint64_t philox_pair(uint64_t seed, uint64_t offset, uint64_t index) {
  const PhiloxWords b = philox_block(seed, offset, index >> 1);
  const int at = static_cast<int>(index & 1) * 2;
  return (static_cast<uint64_t>(b.w[at]) << 32) | b.w[at + 1];
}

// [0, 1) with 24 random bits: exact in float, so identical wherever it is computed.
FATHOM_HOST_DEVICE inline float word_to_unit_float(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}
// [0, 1) with 53 random bits.
FATHOM_HOST_DEVICE inline double pair_to_unit_double(uint64_t pair) {
  return static_cast<double>(pair >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace fathom
