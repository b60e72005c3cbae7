#include "core/generator.h"

#include <cmath>
#include <type_traits>

#include "core/philox.h"
#include "core/dtype_dispatch.h"
#include "core/strided_loop.h"

namespace fathom {
namespace {

// Calls value(i) for the logical index i of every element and stores it (converted) in out.
template <typename ValueFn>
void fill_by_index(const Tensor& out, const char* op, ValueFn&& value) {
  FATHOM_CHECK(out.defined(), op, ": undefined tensor");
  FATHOM_CHECK(out.device().is_cpu(), op, ": only CPU tensors for now, got ", out.str(),
               " (fill on the CPU and copy with .to(device))");
  const Strides logical = contiguous_strides(out.sizes());
  dispatch_dtype(out.dtype(), op, [&]<typename T>() {
    T* base = out.data<T>();
    for_each_strided<2>(out.sizes(), {&out.strides(), &logical},
                        [&](const std::array<int64_t, 2>& at, int64_t n, const std::array<int64_t, 2>& step) {
                          for (int64_t j = 0; j < n; ++j) {
                            const auto v = value(static_cast<uint64_t>(at[1] + j * step[1]));
                            if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
                              base[at[0] + j * step[0]] = T(static_cast<float>(v));
                            else
                              base[at[0] + j * step[0]] = static_cast<T>(v);
                          }
                        });
  });
  out.bump_version();
}

void require_floating(const Tensor& out, const char* op) {
  FATHOM_CHECK(is_floating_point(out.dtype()), op, ": needs a floating-point tensor, got ", dtype_name(out.dtype()));
}

}  // namespace

void fill_uniform(const Tensor& out, Generator& gen, double low, double high) {
  require_floating(out, "uniform");
  FATHOM_CHECK(low <= high, "uniform: low (", low, ") must not exceed high (", high, ")");
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  if (out.dtype() == DType::F64) {
    fill_by_index(out, "uniform", [&](uint64_t i) {
      return low + (high - low) * pair_to_unit_double(philox_pair(seed, offset, i));
    });
  } else {
    const float lo = static_cast<float>(low), span = static_cast<float>(high - low);
    fill_by_index(out, "uniform", [&](uint64_t i) { return lo + span * word_to_unit_float(philox_word(seed, offset, i)); });
  }
}

void fill_normal(const Tensor& out, Generator& gen, double mean, double std) {
  require_floating(out, "normal");
  FATHOM_CHECK(std >= 0, "normal: std must be non-negative, got ", std);
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  // Box-Muller on the element's two words; u1 in (0, 1] so the log is finite.
  if (out.dtype() == DType::F64) {
    fill_by_index(out, "normal", [&](uint64_t i) {
      const uint64_t bits = philox_pair(seed, offset, i);
      const double u1 = (static_cast<double>(bits >> 32) + 1.0) * (1.0 / 4294967296.0);
      const double u2 = static_cast<double>(bits & 0xffffffffu) * (1.0 / 4294967296.0);
      return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    });
  } else {
    const float m = static_cast<float>(mean), s = static_cast<float>(std);
    fill_by_index(out, "normal", [&](uint64_t i) {
      const uint64_t bits = philox_pair(seed, offset, i);
      const float u1 = (static_cast<float>(bits >> 40) + 1.0f) * (1.0f / 16777216.0f);
      const float u2 = static_cast<float>((bits >> 8) & 0xffffffu) * (1.0f / 16777216.0f);
      return m + s * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795865f * u2);
    });
  }
}

void fill_bernoulli(const Tensor& out, Generator& gen, double p) {
  FATHOM_CHECK(p >= 0.0 && p <= 1.0, "bernoulli: p must be in [0, 1], got ", p);
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  // Compare the raw word with p * 2^32 in integers: exact and identical on every device.
  const uint64_t threshold = static_cast<uint64_t>(std::ldexp(p, 32));
  fill_by_index(out, "bernoulli", [&](uint64_t i) { return philox_word(seed, offset, i) < threshold ? 1 : 0; });
}

void fill_randint(const Tensor& out, Generator& gen, int64_t low, int64_t high) {
  FATHOM_CHECK(low < high, "randint: need low < high, got [", low, ", ", high, ")");
  FATHOM_CHECK(out.dtype() != DType::Bool, "randint: bool tensors take bernoulli(), not randint()");
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  // 64 random bits modulo the range: the bias is below range / 2^64, far under any test's reach.
  fill_by_index(out, "randint", [&](uint64_t i) {
    return static_cast<int64_t>(static_cast<uint64_t>(low) + philox_pair(seed, offset, i) % range);
  });
}

void fill_random_words(const Tensor& out, Generator& gen) {
  FATHOM_CHECK(out.dtype() == DType::I32, "random_words: needs an i32 tensor, got ", dtype_name(out.dtype()));
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  fill_by_index(out, "random_words", [&](uint64_t i) { return static_cast<int32_t>(philox_word(seed, offset, i)); });
}

Tensor uniform(const Shape& sizes, Generator& gen, double low, double high, DType dtype) {
  Tensor out = Tensor::empty(sizes, dtype);
  fill_uniform(out, gen, low, high);
  return out;
}
Tensor normal(const Shape& sizes, Generator& gen, double mean, double std, DType dtype) {
  Tensor out = Tensor::empty(sizes, dtype);
  fill_normal(out, gen, mean, std);
  return out;
}
Tensor bernoulli(const Shape& sizes, Generator& gen, double p, DType dtype) {
  Tensor out = Tensor::empty(sizes, dtype);
  fill_bernoulli(out, gen, p);
  return out;
}
Tensor randint(const Shape& sizes, Generator& gen, int64_t low, int64_t high, DType dtype) {
  Tensor out = Tensor::empty(sizes, dtype);
  fill_randint(out, gen, low, high);
  return out;
}

}  // namespace fathom
