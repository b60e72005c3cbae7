#include <catch2/catch.hpp>

#include "core/device.h"
#include "core/dtype.h"
#include "core/cuda/cuda_runtime.h"
#include "core/tensor.h"

using namespace fathom;

TEST_CASE("devices parse and print", "[core]") {
  CHECK(Device::parse("cpu") == kCPU);
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::cuda(2).str() == "cuda:2");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", ""})
    CHECK_THROWS_WITH(Device::parse(bad), Catch::Contains("use cpu, cuda or cuda:<index>"));
}

TEST_CASE("dtype sizes, names and aliases", "[core]") {
  CHECK(element_size(DType::F32) == 4);
  CHECK(element_size(DType::F64) == 8);
  CHECK(element_size(DType::BF16) == 2);
  CHECK(element_size(DType::F16) == 2);
  CHECK(element_size(DType::I64) == 8);
  CHECK(element_size(DType::Bool) == 1);
  for (DType dtype : kAllDTypes) CHECK(parse_dtype(dtype_name(dtype)) == dtype);
  CHECK(parse_dtype("bfloat16") == DType::BF16);
  CHECK(parse_dtype("half") == DType::F16);
  CHECK_THROWS_WITH(parse_dtype("f8"), Catch::Contains("unknown dtype \"f8\""));
  CHECK(is_floating_point(DType::BF16));
  CHECK_FALSE(is_floating_point(DType::I32));
}

TEST_CASE("conversions between every pair of dtypes", "[core]") {
  const Tensor source = Tensor::from_vector<double>({-2.75, -1.0, 0.0, 0.5, 1.0, 3.25, 100.0});
  for (DType dtype : kAllDTypes) {
    const std::vector<double> values = source.to(dtype).to_vector<double>();
    INFO("dtype " << dtype_name(dtype));
    if (dtype == DType::Bool) {
      CHECK(values == std::vector<double>{1, 1, 0, 1, 1, 1, 1});
    } else if (is_floating_point(dtype)) {
      CHECK(values == std::vector<double>{-2.75, -1.0, 0.0, 0.5, 1.0, 3.25, 100.0});  // all exact in 16 bits
    } else {
      CHECK(values == std::vector<double>{-2, -1, 0, 0, 1, 3, 100});  // truncation toward zero
    }
  }
  // Large integers survive i64 -> f64 -> i64 exactly.
  const Tensor big = Tensor::from_vector<int64_t>({(int64_t{1} << 53) - 1, -(int64_t{1} << 40)});
  CHECK(big.to(DType::F64).to(DType::I64).to_vector<int64_t>() == big.to_vector<int64_t>());
}

TEST_CASE("device errors say what is missing", "[core]") {
  if (cuda::device_count() > 0) {
    WARN("this machine has a GPU; the no-GPU error paths are exercised elsewhere");
    return;
  }
  // Without a GPU (or without a CUDA build) asking for device memory names the reason.
  CHECK_THROWS_WITH(Tensor::zeros({2}, DType::F32, Device::cuda(0)), Catch::Contains("no CUDA device: "));
  CHECK_THROWS_WITH(Tensor::ones({2}).to(Device::cuda(0)), Catch::Contains("no CUDA device: "));
  CHECK_THROWS_WITH(cuda::Stream(0), Catch::Contains("no CUDA device: "));
  CHECK_FALSE(cuda::unavailable_reason().empty());
}
