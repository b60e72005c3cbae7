// The rotary embedding's defining properties, beyond the registry's f64 reference: the score of
// a rotated query and key depends only on their distance (what makes RoPE a relative position
// code), explicit positions let a cache's suffix be rotated alone, the inverse undoes it, and
// dims past the rotated ones are copied bit for bit.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/generator.h"
#include "kernels/rotary.h"
#include "test_util.h"

using namespace fathom;

namespace {

Tensor inv_freq(int64_t rotated, float theta) {
  std::vector<float> f(static_cast<size_t>(rotated / 2));
  for (size_t i = 0; i < f.size(); ++i) f[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / rotated);
  return Tensor::from_vector(f, {static_cast<int64_t>(f.size())});
}

Tensor one_position(int64_t p) { return Tensor::from_vector(std::vector<int64_t>{p}, {1}); }

Tensor positions_from(int64_t begin, int64_t count) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < count; ++i) v.push_back(begin + i);
  return Tensor::from_vector(v, {count});
}

double dot(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

}  // namespace

TEST_CASE("rotary_embedding: a query-key score depends only on the distance", "[kernels]") {
  Generator gen(3);
  const Tensor q = uniform({1, 1, 1, 32}, gen, -1, 1, DType::F64), k = uniform({1, 1, 1, 32}, gen, -1, 1, DType::F64);
  const Tensor f = inv_freq(32, 10000.0f);
  const auto score = [&](int64_t m, int64_t n) {
    return dot(rotary_embedding(q, one_position(m), f), rotary_embedding(k, one_position(n), f));
  };
  // To the rounding of the f32 angle (about 1e-5 rad at position 100).
  CHECK(score(7, 3) == Approx(score(104, 100)).margin(1e-4));
  CHECK(score(0, 0) == Approx(dot(q, k)).margin(1e-12));  // angle 0: no rotation
  CHECK(std::abs(score(7, 3) - score(7, 4)) > 1e-3);      // and the distance does matter
}

TEST_CASE("rotary_embedding: explicit positions rotate a cache's suffix alone, the inverse undoes it", "[kernels]") {
  Generator gen(4);
  const Tensor x = uniform({2, 3, 9, 16}, gen, -2, 2, DType::F32);
  const Tensor f = inv_freq(16, 500000.0f);
  const Tensor whole = rotary_embedding(x, positions_from(0, 9), f);
  const Tensor suffix = rotary_embedding(x.narrow(2, 5, 4), positions_from(5, 4), f);
  FATHOM_REQUIRE_CLOSE(suffix, whole.narrow(2, 5, 4), 0.0, 0.0);  // the same arithmetic: the same bits
  FATHOM_REQUIRE_CLOSE(rotary_embedding(whole, positions_from(0, 9), f, /*inverse=*/true), x, 1e-6, 1e-6);
}

TEST_CASE("rotary_embedding: dims past the rotated ones pass through unchanged", "[kernels]") {
  Generator gen(5);
  const Tensor x = uniform({1, 2, 4, 12}, gen, -2, 2, DType::BF16);
  const Tensor out = rotary_embedding(x, positions_from(3, 4), inv_freq(4, 10000.0f));
  FATHOM_REQUIRE_CLOSE(out.narrow(3, 4, 8), x.narrow(3, 4, 8), 0.0, 0.0);
  CHECK_FALSE(out.narrow(3, 0, 4).to_vector<double>() == x.narrow(3, 0, 4).to_vector<double>());
}
