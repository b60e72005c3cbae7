#include "core/xxhash64.h"

#include <cstring>

namespace fathom {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

constexpr uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Unaligned little-endian loads (memcpy compiles to one mov on x86).
uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

constexpr uint64_t round(uint64_t acc, uint64_t input) { return rotl(acc + input * kPrime2, 31) * kPrime1; }
constexpr uint64_t merge_round(uint64_t acc, uint64_t lane) { return (acc ^ round(0, lane)) * kPrime1 + kPrime4; }

}  // namespace

uint64_t xxhash64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + bytes;
  uint64_t hash;
  if (bytes >= 32) {
    uint64_t lane[4] = {seed + kPrime1 + kPrime2, seed + kPrime2, seed, seed - kPrime1};
    for (const unsigned char* stop = end - 32; p <= stop; p += 32)
      for (int i = 0; i < 4; ++i) lane[i] = round(lane[i], load64(p + 8 * i));
    hash = rotl(lane[0], 1) + rotl(lane[1], 7) + rotl(lane[2], 12) + rotl(lane[3], 18);
    for (uint64_t l : lane) hash = merge_round(hash, l);
  } else {
    hash = seed + kPrime5;
  }
  hash += bytes;
  for (; p + 8 <= end; p += 8) hash = rotl(hash ^ round(0, load64(p)), 27) * kPrime1 + kPrime4;
  if (p + 4 <= end) {
    hash = rotl(hash ^ (uint64_t{load32(p)} * kPrime1), 23) * kPrime2 + kPrime3;
    p += 4;
  }
  for (; p < end; ++p) hash = rotl(hash ^ (*p * kPrime5), 11) * kPrime1;
  // Avalanche: every input bit affects every output bit.
  hash ^= hash >> 33;
  hash *= kPrime2;
  hash ^= hash >> 29;
  hash *= kPrime3;
  hash ^= hash >> 32;
  return hash;
}

}  // namespace fathom
