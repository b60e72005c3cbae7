#include <catch2/catch.hpp>

#include <sstream>

#include "core/tensor.h"

using namespace fathom;

namespace {
// 0..n-1 as f32 in the given shape.
Tensor iota(const Shape& shape) { return Tensor::arange(shape_numel(shape)).view(shape); }
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("factories fill, shape and stride", "[core]") {
  const Tensor z = Tensor::zeros({2, 3});
  CHECK(z.sizes() == Shape{2, 3});
  CHECK(z.strides() == Strides{3, 1});
  CHECK(z.is_contiguous());
  CHECK(values(z) == std::vector<float>(6, 0.0f));
  CHECK(values(Tensor::full({2}, 2.5, DType::BF16)) == std::vector<float>{2.5f, 2.5f});
  CHECK(Tensor::scalar(7.0).dim() == 0);
  CHECK(Tensor::scalar(7.0).item() == 7.0);
  CHECK(Tensor::ones({0, 4}).numel() == 0);
  CHECK_THROWS_WITH(Tensor::empty({2, -1}), Catch::Contains("negative size in shape [2, -1]"));
  CHECK_THROWS_WITH(Tensor::zeros({2, 2}).item(), Catch::Contains("has 4 elements, expected exactly one"));
  CHECK_FALSE(Tensor().defined());
}

TEST_CASE("view and reshape share storage when the layout allows", "[core]") {
  const Tensor t = iota({2, 3, 4});
  const Tensor v = t.view({6, -1});
  CHECK(v.sizes() == Shape{6, 4});
  CHECK(v.shares_storage(t));
  // A transposed tensor cannot be flattened without a copy...
  const Tensor tt = t.transpose(1, 2);  // [2, 4, 3]
  CHECK_FALSE(tt.is_contiguous());
  CHECK_THROWS_WITH(tt.view({-1}), Catch::Contains("use reshape()"));
  // ...but its leading dim can still be split, and reshape copies when it must.
  CHECK(tt.view({1, 2, 4, 3}).shares_storage(t));
  const Tensor flat = tt.reshape({-1});
  CHECK_FALSE(flat.shares_storage(t));
  CHECK(values(flat) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 12, 16, 20, 13, 17, 21,
                                           14, 18, 22, 15, 19, 23});
  CHECK(t.reshape({4, 6}).shares_storage(t));
  CHECK_THROWS_WITH(t.view({-1, -1}), Catch::Contains("only one dimension can be -1"));
}

TEST_CASE("transpose, permute and contiguous", "[core]") {
  const Tensor t = iota({2, 3});
  const Tensor tr = t.t();
  CHECK(tr.sizes() == Shape{3, 2});
  CHECK(tr.strides() == Strides{1, 3});
  CHECK(values(tr) == std::vector<float>{0, 3, 1, 4, 2, 5});
  const Tensor c = tr.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.shares_storage(t));
  CHECK(t.contiguous().shares_storage(t));
  const Tensor p = iota({2, 3, 4}).permute({2, 0, 1});
  CHECK(p.sizes() == Shape{4, 2, 3});
  CHECK(p.strides() == Strides{1, 12, 4});
  CHECK(values(p.select(0, 1)) == std::vector<float>{1, 5, 9, 13, 17, 21});
  CHECK_THROWS_WITH(iota({2, 3}).permute({0, 0}), Catch::Contains("permute: dim 0 appears twice"));
  CHECK_THROWS_WITH(iota({2, 3}).t().t().permute({1}), Catch::Contains("permute: got 1 dims"));
}

TEST_CASE("narrow, slice and select address the right elements", "[core]") {
  const Tensor t = iota({4, 5});
  CHECK(values(t.narrow(1, 1, 3)) == std::vector<float>{1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18});
  CHECK(values(t.slice(0, 1, 4, 2)) == std::vector<float>{5, 6, 7, 8, 9, 15, 16, 17, 18, 19});
  CHECK(values(t.slice(1, -2, 100)) == std::vector<float>{3, 4, 8, 9, 13, 14, 18, 19});
  CHECK(values(t.select(1, -1)) == std::vector<float>{4, 9, 14, 19});
  CHECK(t.select(0, 2).select(0, 3).item() == 13.0);
  // Views of views of non-contiguous tensors.
  const Tensor nested = t.t().slice(0, 1, 5, 2).narrow(1, 1, 2);  // rows 1,3 of t^T, cols 1..2
  CHECK(values(nested) == std::vector<float>{6, 11, 8, 13});
  CHECK_THROWS_WITH(t.narrow(0, 3, 2), Catch::Contains("narrow: range [3, 5) out of bounds for dim 0 of size 4"));
  CHECK_THROWS_WITH(t.select(0, 4), Catch::Contains("select: index 4 out of range for dim 0 of size 4"));
  CHECK_THROWS_WITH(t.slice(0, 0, 2, 0), Catch::Contains("step must be positive"));
}

TEST_CASE("expand, squeeze and unsqueeze", "[core]") {
  const Tensor col = iota({3, 1});
  const Tensor e = col.expand({2, 3, 4});
  CHECK(e.strides() == Strides{0, 1, 0});
  CHECK(values(e.select(0, 1).select(0, 2)) == std::vector<float>{2, 2, 2, 2});
  CHECK(col.expand({-1, 2}).sizes() == Shape{3, 2});
  CHECK_THROWS_WITH(col.expand({2, 2}), Catch::Contains("cannot broadcast shape [3, 1] to [2, 2]"));
  CHECK(col.squeeze().sizes() == Shape{3});
  CHECK(col.squeeze(0).sizes() == Shape{3, 1});
  CHECK(col.squeeze(-1).sizes() == Shape{3});
  CHECK(col.unsqueeze(0).sizes() == Shape{1, 3, 1});
  CHECK(col.unsqueeze(-1).sizes() == Shape{3, 1, 1});
  CHECK(values(iota({2, 3}).t().unsqueeze(1).contiguous()) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_WITH(col.unsqueeze(3), Catch::Contains("unsqueeze: dim 3 out of range"));
}

TEST_CASE("copy_ converts, broadcasts and writes through views", "[core]") {
  Tensor t = Tensor::zeros({3, 4}, DType::F64);
  Tensor column = t.select(1, 2);
  column.copy_(Tensor::from_vector<int32_t>({1, 2, 3}));
  CHECK(t.to_vector<double>() == std::vector<double>{0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0});
  t.narrow(0, 0, 2).copy_(Tensor::from_vector<float>({5, 6, 7, 8}, {1, 4}));  // broadcast rows
  CHECK(t.to_vector<double>() == std::vector<double>{5, 6, 7, 8, 5, 6, 7, 8, 0, 0, 3, 0});
  t.t().fill_(-1.5);
  CHECK(t.to_vector<double>() == std::vector<double>(12, -1.5));
  CHECK_THROWS_WITH(t.copy_(Tensor::zeros({5})), Catch::Contains("cannot broadcast shape [5] to [3, 4]"));
}

TEST_CASE("version counter: in-place writes through any view bump it", "[core]") {
  Tensor t = Tensor::zeros({4});
  const Tensor alias = t.view({2, 2});
  const uint64_t v0 = t.version();
  alias.select(0, 1).fill_(3.0);
  CHECK(t.version() == v0 + 1);
  t.copy_(Tensor::ones({4}));
  CHECK(alias.version() == v0 + 2);
  // Release and refill keep the version (and the data size).
  t.storage()->release();
  CHECK(t.storage()->is_released());
  CHECK_THROWS_WITH(t.raw_data(), Catch::Contains("is released"));
  t.storage()->refill();
  CHECK(t.version() == v0 + 2);
  t.fill_(2.0);
  CHECK(alias.to_vector<float>() == std::vector<float>(4, 2.0f));
}

TEST_CASE("as_strided checks the storage bounds", "[core]") {
  const Tensor t = iota({6});
  CHECK(values(t.as_strided({2, 2}, {1, 2}, 1)) == std::vector<float>{1, 3, 2, 4});
  CHECK_THROWS_WITH(t.as_strided({2, 3}, {3, 1}, 1), Catch::Contains("reaches outside its storage of 6 elements"));
}

TEST_CASE("printing small tensors", "[core]") {
  std::ostringstream out;
  out << iota({2, 3}).to(DType::I64);
  CHECK(out.str() == "Tensor[i64, cpu, [2, 3]]\n[[0, 1, 2],\n [3, 4, 5]]");
  std::ostringstream big;
  big << iota({2000});
  CHECK(big.str().find("[0, 1, 2, ..., 1997, 1998, 1999]") != std::string::npos);
}
