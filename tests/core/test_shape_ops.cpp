#include <catch2/catch.hpp>

#include "core/shape_ops.h"

using namespace fathom;

namespace {
Tensor iota(const Shape& shape) { return Tensor::arange(shape_numel(shape)).view(shape); }
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("cat joins along any dim, including non-contiguous inputs", "[core]") {
  const Tensor a = iota({2, 2});
  const Tensor b = iota({2, 3}).t().contiguous().t();  // non-contiguous [2, 3]
  CHECK(values(cat({a, b}, 1)) == std::vector<float>{0, 1, 0, 1, 2, 2, 3, 3, 4, 5});
  CHECK(values(cat({a, a}, 0)) == std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(cat({a, Tensor::zeros({0, 2})}, 0).sizes() == Shape{2, 2});
  CHECK_THROWS_WITH(cat({a, b}, 0), Catch::Contains("cat: tensor 1 has shape [2, 3] but tensor 0 has shape [2, 2]"));
  CHECK_THROWS_WITH(cat({a, a.to(DType::F64)}, 0), Catch::Contains("same dtype, got f32 and f64"));
  CHECK_THROWS_WITH(cat({}, 0), Catch::Contains("at least one tensor"));
}

TEST_CASE("stack adds a dimension", "[core]") {
  const Tensor a = iota({3});
  const Tensor s = stack({a, a}, 1);
  CHECK(s.sizes() == Shape{3, 2});
  CHECK(values(s) == std::vector<float>{0, 0, 1, 1, 2, 2});
  CHECK_THROWS_WITH(stack({a, iota({4})}), Catch::Contains("stack: tensor 1 has shape [4]"));
}

TEST_CASE("split and chunk return views covering the tensor", "[core]") {
  const Tensor t = iota({7, 2});
  const auto parts = split(t, 3);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].sizes() == Shape{3, 2});
  CHECK(parts[2].sizes() == Shape{1, 2});
  CHECK(parts[1].shares_storage(t));
  CHECK(values(parts[2]) == std::vector<float>{12, 13});
  const auto chunks = chunk(t, 3);  // like torch.chunk: ceil(7/3) = 3 per chunk
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[2].size(0) == 1);
  const auto columns = split_with_sizes(t, {1, 1}, 1);
  CHECK(values(columns[1]) == std::vector<float>{1, 3, 5, 7, 9, 11, 13});
  CHECK_THROWS_WITH(split_with_sizes(t, {3, 3}, 0), Catch::Contains("add up to 6 but dim 0 of [7, 2] has size 7"));
  CHECK_THROWS_WITH(chunk(t, 0), Catch::Contains("number of chunks must be positive"));
}
