#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/generator.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/reduction.h"
#include "core/threads.h"
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
  binary_into(BinaryOp::Add, out_storage.t(), a, b.t(), /*accumulate=*/true);
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
  CHECK_THROWS_WITH(binary_into(BinaryOp::Add, Tensor::zeros({3}), Tensor::zeros({2, 3}), Tensor::zeros({3})),
                    Catch::Contains("result of shape [2, 3] does not fit the output of shape [3]"));
  CHECK_THROWS_WITH(add(Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}), Tensor::zeros({1})),
                    Catch::Contains("more than 8 dims"));
}

TEST_CASE("in-place ops write through views and bump the version", "[kernels]") {
  Tensor t = Tensor::arange(6).view({2, 3});
  Tensor row = t.select(0, 1);
  const uint64_t before = t.version();
  add_(row, Tensor::from_vector<float>({10, 20, 30}));
  mul_(row, 2.0);
  CHECK(t.to_vector<float>() == std::vector<float>{0, 1, 2, 26, 48, 70});
  CHECK(t.version() == before + 2);
  clamp_(t, 1.0, 40.0);
  CHECK(t.to_vector<float>() == std::vector<float>{1, 1, 2, 26, 40, 40});
}

TEST_CASE("scalar operands stay exact instead of rounding to the tensor's dtype", "[kernels]") {
  // 0.1 is not representable in bf16; x + 0.1 must round once, from the f32 sum.
  const Tensor x = Tensor::full({1}, 1.0, DType::BF16);
  const float expected = static_cast<float>(BFloat16(1.1f));
  CHECK(add(x, 0.1).to_vector<float>()[0] == expected);
  CHECK(sub(1.0, Tensor::full({2}, 0.25)).to_vector<float>() == std::vector<float>{0.75f, 0.75f});
  CHECK(div(Tensor::full({1}, 1.0, DType::F64), 3.0).item() == 1.0 / 3.0);
}

TEST_CASE("comparisons give bool tensors and where selects", "[kernels]") {
  const Tensor a = Tensor::from_vector<float>({1, 5, 3});
  const Tensor b = Tensor::from_vector<float>({2, 5, 1});
  const Tensor less = lt(a, b);
  CHECK(less.dtype() == DType::Bool);
  CHECK(less.to_vector<double>() == std::vector<double>{1, 0, 0});
  CHECK(where(ge(a, b), a, b).to_vector<float>() == std::vector<float>{2, 5, 3});
  CHECK_THROWS_WITH(binary_into(BinaryOp::Lt, Tensor::zeros({3}), a, b), Catch::Contains("a comparison writes a bool tensor"));
}

TEST_CASE("NaN propagates through max, min, relu and clamp", "[kernels]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_vector<float>({nan, 1.0f});
  const Tensor y = Tensor::from_vector<float>({0.0f, nan});
  for (const Tensor& r : {maximum(x, y), minimum(x, y)}) {
    const auto v = r.to_vector<float>();
    CHECK(std::isnan(v[0]));
  }
  CHECK(std::isnan(relu(x).to_vector<float>()[0]));
  CHECK(std::isnan(clamp(x, 0, 1).to_vector<float>()[0]));
}

TEST_CASE("f32 exp and tanh approximations hold their accuracy over the whole range", "[kernels]") {
  // A dense sweep, including the branch points of the approximations and the overflow limits.
  std::vector<float> xs;
  for (float x = -100.0f; x <= 100.0f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 0.625f, -0.625f, 88.7f, -87.3f, 89.0f, -88.0f}) xs.push_back(x);
  const Tensor input = Tensor::from_vector<float>(xs);
  const auto e = exp(input).to_vector<float>();
  const auto t = tanh(input).to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    INFO("x = " << xs[i]);
    const double exact_exp = std::exp(static_cast<double>(xs[i]));
    if (exact_exp > std::numeric_limits<float>::max()) CHECK(std::isinf(e[i]));
    else if (exact_exp < 1.2e-38) CHECK(e[i] <= 1.2e-38f);
    else CHECK(std::fabs(e[i] - exact_exp) <= 3e-7 * exact_exp);
    CHECK(std::fabs(t[i] - std::tanh(static_cast<double>(xs[i]))) <= 2e-7 * std::fabs(std::tanh(xs[i])) + 1e-9);
  }
  const Tensor special = Tensor::from_vector<float>({std::numeric_limits<float>::infinity(),
                                                     -std::numeric_limits<float>::infinity()});
  CHECK(exp(special).to_vector<float>() == std::vector<float>{std::numeric_limits<float>::infinity(), 0.0f});
  CHECK(tanh(special).to_vector<float>() == std::vector<float>{1.0f, -1.0f});
}

TEST_CASE("optimizer kernels need flat f32 state", "[kernels]") {
  const Tensor p = Tensor::zeros({4});
  const Tensor strided = Tensor::zeros({4, 2}).select(1, 0);
  CHECK_THROWS_WITH(adam_step(p, p, strided, p, AdamHyper{}), Catch::Contains("adam_step: exp_avg must be contiguous"));
  // The overflow check sees every tensor of the list, including non-contiguous views.
  Tensor grads = Tensor::zeros({3, 3});
  CHECK_FALSE(has_inf_or_nan({p, grads.t()}));
  grads.select(1, 2).fill_(std::numeric_limits<double>::infinity());
  CHECK(has_inf_or_nan({p, grads.t()}));
}

TEST_CASE("column sums (a bias gradient) are the same bits as the strided reduction, on any thread count",
          "[kernels]") {
  // sum over dim 0 of a dense matrix takes the row-sweeping column path; the same sums over the
  // last dim of the transposed copy take the generic one. Past 8192 rows the chunks merge; 300
  // columns leave a partial block; 16-bit, f64, integer, squares and mean all go through it.
  const int threads = num_threads();
  Generator gen(9);
  for (const int64_t rows : {int64_t{37}, int64_t{8192 * 2 + 5}})
    for (const DType dtype : {DType::F32, DType::BF16, DType::F64, DType::I64}) {
      const Tensor x = dtype == DType::I64 ? randint({rows, 300}, gen, -50, 50)
                                           : uniform({rows, 300}, gen, -1, 1, dtype);
      const Tensor transposed = x.t().contiguous();
      for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::SumOfSquares}) {
        if (dtype == DType::I64 && op != ReduceOp::Sum) continue;
        INFO("rows " << rows << " " << dtype_name(dtype) << " op " << static_cast<int>(op));
        const Tensor generic = reduce(op, transposed, {1}, false);
        for (const int t : {1, 2, 3}) {
          set_num_threads(t);
          CHECK(fathom::testing::mismatch(reduce(op, x, {0}, false), generic, 0, 0) == "");
        }
        set_num_threads(threads);
      }
    }
}
