#include "core/xxhash64.h"

#include <algorithm>
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
  Xxhash64Stream stream(seed);
  stream.update(data, bytes);
  return stream.digest();
}

Xxhash64Stream::Xxhash64Stream(uint64_t seed)
    : seed_(seed), lanes_{seed + kPrime1 + kPrime2, seed + kPrime2, seed, seed - kPrime1} {}

void Xxhash64Stream::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + bytes;
  total_ += bytes;
  if (pending_bytes_ > 0) {  // complete the stripe begun by an earlier piece
    const size_t take = std::min<size_t>(32 - pending_bytes_, bytes);
    std::memcpy(pending_ + pending_bytes_, p, take);
    pending_bytes_ += take;
    p += take;
    if (pending_bytes_ < 32) return;
    for (int i = 0; i < 4; ++i) lanes_[i] = round(lanes_[i], load64(pending_ + 8 * i));
    pending_bytes_ = 0;
  }
  for (; end - p >= 32; p += 32)
    for (int i = 0; i < 4; ++i) lanes_[i] = round(lanes_[i], load64(p + 8 * i));
  pending_bytes_ = static_cast<size_t>(end - p);
  std::memcpy(pending_, p, pending_bytes_);
}

uint64_t Xxhash64Stream::digest() const {
  uint64_t hash;
  if (total_ >= 32) {
    hash = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18);
    for (uint64_t l : lanes_) hash = merge_round(hash, l);
  } else {
    hash = seed_ + kPrime5;
  }
  hash += total_;
  const unsigned char* p = pending_;
  const unsigned char* const end = pending_ + pending_bytes_;
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
