#pragma once
// Random tensors from the counter-based Philox generator (core/philox.h).
//
// A Generator is just (seed, offset). Each fill draws one stream offset, then element i of the
// result is a pure function of (seed, offset, i), so results do not depend on the thread count
// or on the device. Raw words, uniform, bernoulli and randint are bit-identical on CPU and
// GPU; normal uses log/sqrt/cos and is bit-identical across thread counts and within a few ulp
// between CPU and GPU.

#include <cstdint>

#include "core/tensor.h"

namespace fathom {

// The one default seed (weights' initialisation, dropout, data shuffling) where a program or a
// config gives none; Megatron's default too.
inline constexpr uint64_t kDefaultSeed = 1234;

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Returns the offset for the next draw and advances past it.
  uint64_t next_offset() { return offset_++; }

 private:
  uint64_t seed_;
  uint64_t offset_;
};

// Each fills `out` (any layout; CPU for now) in logical row-major element order and bumps its
// version. Floating-point dtypes only, except where noted.
void fill_uniform(const Tensor& out, Generator& gen, double low = 0.0, double high = 1.0);
void fill_normal(const Tensor& out, Generator& gen, double mean = 0.0, double std = 1.0);
// 1 with probability p, else 0; any dtype (bool included).
void fill_bernoulli(const Tensor& out, Generator& gen, double p);
// Integers uniformly in [low, high); integer or floating dtypes.
void fill_randint(const Tensor& out, Generator& gen, int64_t low, int64_t high);
// The raw 32-bit Philox word of every element (i32 tensor), for testing and other devices.
void fill_random_words(const Tensor& out, Generator& gen);

Tensor uniform(const Shape& sizes, Generator& gen, double low = 0.0, double high = 1.0, DType dtype = DType::F32);
Tensor normal(const Shape& sizes, Generator& gen, double mean = 0.0, double std = 1.0, DType dtype = DType::F32);
Tensor bernoulli(const Shape& sizes, Generator& gen, double p, DType dtype = DType::F32);
Tensor randint(const Shape& sizes, Generator& gen, int64_t low, int64_t high, DType dtype = DType::I64);

}  // namespace fathom
