// core/convert.h: the element conversion rule the CPU and the GPU copies share.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/convert.h"
#include "core/tensor.h"

using namespace fathom;

TEST_CASE("convert: float to integer truncates, saturates and maps NaN to 0", "[core]") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(convert<int32_t>(2.9) == 2);
  CHECK(convert<int32_t>(-2.9) == -2);
  CHECK(convert<int32_t>(2147483647.5) == INT32_MAX);
  CHECK(convert<int32_t>(2147483648.0) == INT32_MAX);
  CHECK(convert<int32_t>(-2147483648.9) == INT32_MIN);
  CHECK(convert<int32_t>(-2147483649.0) == INT32_MIN);
  CHECK(convert<int32_t>(inf) == INT32_MAX);
  CHECK(convert<int32_t>(-inf) == INT32_MIN);
  CHECK(convert<int32_t>(std::nan("")) == 0);
  CHECK(convert<int64_t>(9.3e18) == INT64_MAX);
  CHECK(convert<int64_t>(-9.3e18f) == INT64_MIN);
  CHECK(convert<int64_t>(-9223372036854775808.0) == INT64_MIN);
  CHECK(convert<int64_t>(9007199254740993.0) == 9007199254740992);  // the double already rounded
  CHECK(convert<int32_t>(Half(-70000.0f)) == INT32_MIN);            // -Inf in f16
  CHECK(convert<int64_t>(BFloat16(std::nanf(""))) == 0);
  CHECK(convert<int32_t>(int64_t{1} << 33 | 7) == 7);  // integer narrowing wraps, as in C++
}

TEST_CASE("convert: 16-bit floats round once, through float; bool is non-zero", "[core]") {
  // 1 + 2^-11 is halfway between two f16 values: ties to even gives 1.
  CHECK(convert<Half>(1.0 + 1.0 / 2048).bits == Half(1.0f).bits);
  CHECK(convert<BFloat16>(int64_t{257}).bits == BFloat16(256.0f).bits);
  CHECK(static_cast<float>(convert<Half>(BFloat16(3.0f))) == 3.0f);
  CHECK(convert<double>(Half(0.5f)) == 0.5);
  CHECK(convert<bool>(std::nan("")));
  CHECK_FALSE(convert<bool>(-0.0));
  CHECK(convert<bool>(Half(1e-7f)));  // the smallest f16 subnormal is non-zero
  CHECK(convert<float>(true) == 1.0f);
}

TEST_CASE("CPU copies follow the rule: f32 -> i32 saturates instead of x86's INT_MIN", "[core]") {
  const Tensor x = Tensor::from_vector<float>({3e9f, -3e9f, std::nanf(""), -7.5f});
  CHECK(x.to(DType::I32).to_vector<int32_t>() == std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, -7});
}
