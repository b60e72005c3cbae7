#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <limits>

#include "core/half.h"
#include "core/tensor.h"

using namespace fathom;

namespace {
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
__attribute__((target("f16c"))) uint16_t hardware_float_to_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
}  // namespace

TEST_CASE("float -> f16 rounds to nearest even, keeps NaN and Inf", "[core]") {
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-0.0f) == 0x8000);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);               // largest finite
  CHECK(float_to_half_bits(65519.0f) == 0x7bff);               // rounds down
  CHECK(float_to_half_bits(65520.0f) == 0x7c00);               // halfway to 2^16: rounds to Inf
  CHECK(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie -> even
  CHECK(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie -> even
  CHECK(float_to_half_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(float_to_half_bits(std::ldexp(1.0f, -25)) == 0x0000);  // tie -> even (zero)
  CHECK(float_to_half_bits(3 * std::ldexp(1.0f, -25)) == 0x0002);
  CHECK(float_to_half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(float_to_half_bits(-std::numeric_limits<float>::infinity()) == 0xfc00);
  const uint16_t nan = float_to_half_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  CHECK(std::isnan(half_bits_to_float(float_to_half_bits(from_bits(0x7f800001u)))));  // signalling NaN stays NaN
}

TEST_CASE("f16 -> float -> f16 is the identity on every bit pattern", "[core]") {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float value = half_bits_to_float(static_cast<uint16_t>(bits));
    const uint16_t back = float_to_half_bits(value);
    if (std::isnan(value)) {
      REQUIRE((bits & 0x7c00) == 0x7c00);
      REQUIRE((bits & 0x03ff) != 0);
      REQUIRE(back == (bits | 0x0200));  // quietened, payload kept
    } else {
      REQUIRE(back == bits);
    }
  }
}

TEST_CASE("float -> f16 agrees with the F16C instruction", "[core]") {
  if (!__builtin_cpu_supports("f16c")) {
    WARN("this CPU has no F16C; hardware comparison skipped");
    return;
  }
  // An odd stride walks all exponents, signs and many mantissa patterns (incl. NaN payloads).
  for (uint64_t i = 0; i < 2'000'000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(i * 2147u + (i >> 3));
    const float value = from_bits(bits);
    INFO("float bits 0x" << std::hex << bits);
    REQUIRE(float_to_half_bits(value) == hardware_float_to_half(value));
  }
}

TEST_CASE("float -> bf16 rounds to nearest even, keeps NaN and Inf", "[core]") {
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16_bits(-2.0f) == 0xc000);
  CHECK(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie -> even
  CHECK(float_to_bfloat16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie -> even
  CHECK(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(float_to_bfloat16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to Inf
  CHECK(float_to_bfloat16_bits(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(float_to_bfloat16_bits(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(from_bits(0x7f800001u)))));  // no rounding to Inf
  CHECK(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(from_bits(0xffffffffu)))));
  CHECK(float_to_bfloat16_bits(from_bits(0x00000001u)) == 0x0000);  // float subnormal: tie-free round down
}

TEST_CASE("bf16 -> float -> bf16 is the identity on every non-NaN pattern", "[core]") {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float value = bfloat16_bits_to_float(static_cast<uint16_t>(bits));
    const uint16_t back = float_to_bfloat16_bits(value);
    if (std::isnan(value)) REQUIRE(std::isnan(bfloat16_bits_to_float(back)));
    else REQUIRE(back == bits);
  }
}

TEST_CASE("tensor conversions to 16-bit types keep NaN, Inf and round", "[core]") {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor source = Tensor::from_vector<float>({std::numeric_limits<float>::quiet_NaN(), inf, -inf, 70000.0f,
                                                    1.0f + 3 * std::ldexp(1.0f, -11)});
  const std::vector<float> as_half = source.to(DType::F16).to_vector<float>();
  CHECK(std::isnan(as_half[0]));
  CHECK(as_half[1] == inf);
  CHECK(as_half[2] == -inf);
  CHECK(as_half[3] == inf);  // beyond f16's range
  CHECK(as_half[4] == 1.0f + std::ldexp(1.0f, -9));
  const std::vector<float> as_bf16 = source.to(DType::BF16).to_vector<float>();
  CHECK(std::isnan(as_bf16[0]));
  CHECK(as_bf16[1] == inf);
  CHECK(as_bf16[3] == 70144.0f);  // nearest bf16 to 70000
}
