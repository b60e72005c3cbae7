#include <catch2/catch.hpp>

#include "core/generator.h"
#include "kernels/binary_ops.h"
#include "test_util.h"

using namespace fathom;

TEST_CASE("add broadcasts like numpy", "[kernels]") {
  const Tensor a = Tensor::arange(6).view({2, 3});
  const Tensor row = Tensor::from_vector<float>({10, 20, 30});
  const Tensor col = Tensor::from_vector<float>({100, 200}, {2, 1});
  CHECK(add(a, row).to_vector<float>() == std::vector<float>{10, 21, 32, 13, 24, 35});
  CHECK(add(col, row).sizes() == Shape{2, 3});
  CHECK(add(col, row).to_vector<float>() == std::vector<float>{110, 120, 130, 210, 220, 230});
  CHECK(add(a, Tensor::scalar(1.0)).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("add on non-contiguous operands and outputs, with accumulate", "[kernels]") {
  Generator gen(3);
  const Tensor a = uniform({7, 5}, gen, -1, 1, DType::F64);
  const Tensor b = uniform({5, 7}, gen, -1, 1, DType::F64);
  const Tensor expected = Tensor::from_vector<double>([&] {
    std::vector<double> out(35);
    const auto av = a.to_vector<double>(), bt = b.t().to_vector<double>();
    for (int i = 0; i < 35; ++i) out[i] = av[i] + bt[i];
    return out;
  }(), {7, 5});
  CHECK(fathom::testing::mismatch(add(a, b.t()), expected, 0, 0) == "");
  Tensor out_storage = Tensor::ones({5, 7}, DType::F64);
  add_into(out_storage.t(), a, b.t(), /*accumulate=*/true);
  CHECK(fathom::testing::mismatch(out_storage.t(), add(expected, Tensor::scalar(1.0, DType::F64)), 1e-15, 0) == "");
}

TEST_CASE("add in 16-bit types computes in f32 and rounds once", "[kernels]") {
  const Tensor a = Tensor::from_vector<float>({1.0f, 256.0f, -3.5f}).to(DType::BF16);
  const Tensor b = Tensor::from_vector<float>({0.00390625f, 1.0f, 3.5f}).to(DType::BF16);
  CHECK(add(a, b).to_vector<float>() == std::vector<float>{1.0f, 256.0f, 0.0f});  // 1 + 2^-8 ties to 1
  const Tensor h = Tensor::from_vector<float>({1.0f, 2048.0f}).to(DType::F16);
  CHECK(add(h, h).to_vector<float>() == std::vector<float>{2.0f, 4096.0f});
  CHECK(add(Tensor::arange(3, DType::I64), Tensor::arange(3, DType::I64)).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 2, 4});
}

TEST_CASE("add rejects mismatched inputs with clear errors", "[kernels]") {
  const Tensor a = Tensor::zeros({4, 64, 768});
  CHECK_THROWS_WITH(add(a, Tensor::zeros({512, 10})),
                    Catch::Contains("add: shapes [4, 64, 768] and [512, 10] cannot be broadcast"));
  CHECK_THROWS_WITH(add(Tensor::zeros({2}), Tensor::zeros({2}, DType::F64)),
                    Catch::Contains("add: expected tensors of the same dtype, got f32 and f64"));
  CHECK_THROWS_WITH(add(Tensor::zeros({2}, DType::Bool), Tensor::zeros({2}, DType::Bool)),
                    Catch::Contains("bool tensors are not supported"));
  CHECK_THROWS_WITH(add_into(Tensor::zeros({3}), Tensor::zeros({2, 3}), Tensor::zeros({3})),
                    Catch::Contains("result of shape [2, 3] does not fit the output of shape [3]"));
  CHECK_THROWS_WITH(add(Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}), Tensor::zeros({1})),
                    Catch::Contains("more than 8 dims"));
}
