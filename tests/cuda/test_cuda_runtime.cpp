#include <cstdio>

#include "core/allocator.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "require_cuda.h"

using namespace fathom;

TEST_CASE("a CUDA device is present and described", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const cuda::DeviceProperties props = cuda::device_properties(0);
  std::printf("cuda:0 %s, sm_%d%d, %.1f GiB, %d SMs, driver %d, runtime %d\n", props.name.c_str(), props.major,
              props.minor, props.total_memory / 1073741824.0, props.multiprocessors, props.driver_version,
              props.runtime_version);
  CHECK(props.major >= 7);
  CHECK(props.total_memory > 0);
  CHECK_THROWS_WITH(cuda::require_device(cuda::device_count()), Catch::Contains("no CUDA device cuda:"));
}

TEST_CASE("host <-> device copies round-trip every dtype", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(11);
  const Tensor source = uniform({37, 5}, gen, -100, 100, DType::F64);
  for (DType dtype : kAllDTypes) {
    INFO("dtype " << dtype_name(dtype));
    const Tensor host = source.to(dtype);
    const Tensor device = host.to(Device::cuda(0));
    CHECK(device.device() == Device::cuda(0));
    CHECK(device.to(kCPU).to_vector<double>() == host.to_vector<double>());
  }
  // Non-contiguous host tensors are made contiguous on the way.
  const Tensor t = source.t();
  CHECK(t.to(Device::cuda(0)).to_vector<double>() == t.to_vector<double>());
}

TEST_CASE("the device allocator keeps exact tagged counters", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  const int64_t before = memory_snapshot(gpu)[MemoryTag::Gradients].current;
  {
    MemoryTagScope scope(MemoryTag::Gradients);
    const Tensor g = Tensor::zeros({1000}, DType::F32, gpu);
    CHECK(memory_snapshot(gpu)[MemoryTag::Gradients].current == before + 4000);
    CHECK(g.to_vector<float>() == std::vector<float>(1000, 0.0f));
  }
  CHECK(memory_snapshot(gpu)[MemoryTag::Gradients].current == before);
  // Release/refill of a device storage (ZeRO-3 path).
  Tensor p = Tensor::ones({256}, DType::F32, gpu);
  p.storage()->release();
  CHECK_THROWS_WITH(p.raw_data(), Catch::Contains("is released"));
  p.storage()->refill();
  p.fill_(3.0);
  CHECK(p.to_vector<float>() == std::vector<float>(256, 3.0f));
}

TEST_CASE("streams and events work and time", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cuda::Stream stream(0);
  cuda::Event start(true), stop(true);
  start.record(stream);
  stop.record(stream);
  stream.synchronize();
  CHECK(stop.query());
  CHECK(start.elapsed_ms(stop) >= 0.0f);
  cuda::Stream moved = std::move(stream);
  CHECK(moved.handle() != nullptr);
  CHECK(stream.handle() == nullptr);
}
