#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/generator.h"
#include "core/philox.h"
#include "core/threads.h"

using namespace fathom;

namespace {
// Restores the thread setting when a test changes it.
struct ThreadCount {
  int saved = num_threads();
  ~ThreadCount() { set_num_threads(saved); }
};
double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }
double variance_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return sum / v.size();
}
}  // namespace

TEST_CASE("Philox-4x32-10 matches the Random123 known-answer vectors", "[core]") {
  // From Random123's kat_vectors (Salmon et al.): counter, key -> output.
  struct Vector {
    uint32_t counter[4];
    uint32_t key[2];
    uint32_t expected[4];
  };
  const Vector vectors[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Vector& v : vectors) {
    const PhiloxWords out =
        philox4x32_10(v.counter[0], v.counter[1], v.counter[2], v.counter[3], v.key[0], v.key[1]);
    for (int i = 0; i < 4; ++i) CHECK(out.w[i] == v.expected[i]);
  }
}

TEST_CASE("raw words follow the documented counter layout", "[core]") {
  Generator gen(/*seed=*/0x299f31d0a4093822ull, /*offset=*/0x0370734413198a2eull);
  const Tensor words = Tensor::empty({8}, DType::I32);
  fill_random_words(words, gen);
  CHECK(gen.offset() == 0x0370734413198a2full);  // one draw, one offset
  const std::vector<int32_t> w = words.to_vector<int32_t>();
  // Block 0 of that (seed, offset) is counter (0, 0, 0x13198a2e, 0x03707344).
  const PhiloxWords block0 = philox4x32_10(0, 0, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0);
  const PhiloxWords block1 = philox4x32_10(1, 0, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0);
  for (int i = 0; i < 4; ++i) {
    CHECK(static_cast<uint32_t>(w[i]) == block0.w[i]);
    CHECK(static_cast<uint32_t>(w[4 + i]) == block1.w[i]);
  }
}

TEST_CASE("random tensors are identical for any thread count", "[core]") {
  ThreadCount restore;
  const Shape shape = {513, 257};  // above the threading grain, odd sizes
  auto draw_all = [&] {
    Generator gen(1234);
    std::vector<std::vector<double>> out;
    out.push_back(uniform(shape, gen).to_vector<double>());
    out.push_back(normal(shape, gen).to_vector<double>());
    out.push_back(normal(shape, gen, 0.0, 1.0, DType::F64).to_vector<double>());
    out.push_back(bernoulli(shape, gen, 0.3).to_vector<double>());
    out.push_back(randint(shape, gen, -5, 17).to_vector<double>());
    return out;
  };
  set_num_threads(1);
  const auto single = draw_all();
  set_num_threads(2);
  CHECK(draw_all() == single);
  set_num_threads(5);
  CHECK(draw_all() == single);
}

TEST_CASE("values depend on the logical index, not the memory layout", "[core]") {
  Generator a(7), b(7);
  const Tensor contiguous = uniform({6, 9}, a);
  const Tensor transposed_storage = Tensor::empty({9, 6});
  fill_uniform(transposed_storage.t(), b);  // a [6, 9] view with strides (1, 6)
  CHECK(transposed_storage.t().to_vector<float>() == contiguous.to_vector<float>());
}

TEST_CASE("seeds and offsets select independent streams", "[core]") {
  Generator gen(42);
  const auto first = uniform({64}, gen).to_vector<float>();
  const auto second = uniform({64}, gen).to_vector<float>();
  CHECK(first != second);
  Generator replay(42);
  CHECK(uniform({64}, replay).to_vector<float>() == first);
  Generator other_seed(43);
  CHECK(uniform({64}, other_seed).to_vector<float>() != first);
  Generator resumed(42, 1);
  CHECK(uniform({64}, resumed).to_vector<float>() == second);
}

TEST_CASE("distributions have the right range and moments", "[core]") {
  Generator gen(2024);
  const auto u = uniform({200000}, gen, -1.0, 3.0).to_vector<double>();
  CHECK(*std::min_element(u.begin(), u.end()) >= -1.0);
  CHECK(*std::max_element(u.begin(), u.end()) < 3.0);
  CHECK(mean_of(u) == Approx(1.0).margin(0.02));
  CHECK(variance_of(u) == Approx(16.0 / 12.0).epsilon(0.02));
  const auto n = normal({200000}, gen, 2.0, 0.5).to_vector<double>();
  CHECK(mean_of(n) == Approx(2.0).margin(0.01));
  CHECK(std::sqrt(variance_of(n)) == Approx(0.5).epsilon(0.02));
  const auto bits = bernoulli({200000}, gen, 0.25, DType::Bool).to_vector<double>();
  CHECK(mean_of(bits) == Approx(0.25).margin(0.01));
  const auto ints = randint({100000}, gen, -3, 4).to_vector<int64_t>();
  CHECK(*std::min_element(ints.begin(), ints.end()) == -3);
  CHECK(*std::max_element(ints.begin(), ints.end()) == 3);
  CHECK(bernoulli({100}, gen, 0.0).to_vector<float>() == std::vector<float>(100, 0.0f));
  CHECK(bernoulli({100}, gen, 1.0).to_vector<float>() == std::vector<float>(100, 1.0f));
}

TEST_CASE("16-bit uniforms are the f32 uniforms rounded", "[core]") {
  Generator a(5), b(5);
  const Tensor f32 = uniform({1000}, a);
  const Tensor bf16 = uniform({1000}, b, 0.0, 1.0, DType::BF16);
  CHECK(bf16.to_vector<float>() == f32.to(DType::BF16).to_vector<float>());
}

TEST_CASE("bad random-fill arguments are reported", "[core]") {
  Generator gen(0);
  CHECK_THROWS_WITH(uniform({4}, gen, 0.0, 1.0, DType::I32), Catch::Contains("needs a floating-point tensor, got i32"));
  CHECK_THROWS_WITH(uniform({4}, gen, 2.0, 1.0), Catch::Contains("low (2) must not exceed high (1)"));
  CHECK_THROWS_WITH(bernoulli({4}, gen, 1.5), Catch::Contains("p must be in [0, 1], got 1.5"));
  CHECK_THROWS_WITH(randint({4}, gen, 3, 3), Catch::Contains("need low < high"));
  CHECK_THROWS_WITH(normal({4}, gen, 0.0, -1.0), Catch::Contains("std must be non-negative"));
}
