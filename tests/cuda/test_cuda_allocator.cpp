// The caching device allocator on a real GPU: per-stream reuse with two streams, record_stream,
// exact counters, no cudaMalloc once warm, empty_cache, poison and the out-of-memory error.
// (Its bookkeeping is tested on the CPU over a fake backend: tests/core/test_caching_allocator.cpp.)
#include <cmath>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/caching_allocator.h"
#include "core/tensor.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

namespace {
const Device kGpu = Device::cuda(0);

class PoisonScope {
 public:
  explicit PoisonScope(bool enabled) : previous_(cuda::allocation_poison()) { cuda::set_allocation_poison(enabled); }
  ~PoisonScope() { cuda::set_allocation_poison(previous_); }

 private:
  bool previous_;
};
}  // namespace

TEST_CASE("device blocks are reused on their own stream, never on another", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cuda::empty_cache(0);  // stream handles get reused: no blocks of earlier, destroyed streams
  cuda::Stream a(0), b(0);
  void* first = nullptr;
  {
    cuda::CurrentStreamGuard on_a(a);
    first = Tensor::ones({1000}, DType::F32, kGpu).raw_data();
  }
  {
    cuda::CurrentStreamGuard on_b(b);
    const Tensor t = Tensor::ones({1000}, DType::F32, kGpu);
    CHECK(t.raw_data() != first);
  }
  {
    cuda::CurrentStreamGuard on_a(a);
    const Tensor t = Tensor::full({1000}, 2.0, DType::F32, kGpu);
    CHECK(t.raw_data() == first);
    CHECK(t.to_vector<float>() == std::vector<float>(1000, 2.0f));
  }
  a.synchronize();
  b.synchronize();
}

TEST_CASE("a block recorded on another stream is reused once that stream's work is done", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cuda::empty_cache(0);
  cuda::CachingAllocator& allocator = cuda::caching_allocator(0);
  cuda::Stream compute(0), comm(0);
  const Shape shape{int64_t{1} << 20};  // 4 MiB of f32: a size class no other block here has
  void* block = nullptr;
  Tensor result = Tensor::empty(shape, DType::F16, kGpu);
  cuda::synchronize_device(0);  // a poison memset on the default stream must not race the write on comm
  {
    cuda::CurrentStreamGuard on_compute(compute);
    const Tensor grad = Tensor::full(shape, 1.5, DType::F32, kGpu);
    block = grad.raw_data();
    compute.synchronize();  // the side stream's read below must see the fill
    cuda::record_stream(grad.narrow(0, 10, 5).raw_data(), comm);  // an interior pointer finds the block
    cuda::CurrentStreamGuard on_comm(comm);
    result.copy_(grad);  // read on the communication stream
  }  // grad freed on the compute stream's behalf while comm may still read it
  CHECK(allocator.info().pending_bytes + allocator.info().cached_bytes >= 4u << 20);
  comm.synchronize();
  {
    cuda::CurrentStreamGuard on_compute(compute);
    const Tensor again = Tensor::empty(shape, DType::F32, kGpu);
    CHECK(again.raw_data() == block);  // comm finished: the event completed, the block is free again
  }
  CHECK(allocator.info().pending_bytes == 0);
  CHECK(result.to_vector<float>() == std::vector<float>(shape[0], 1.5f));
  compute.synchronize();
}

TEST_CASE("device counters are exact and a warm pattern makes no cudaMalloc", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cuda::CachingAllocator& allocator = cuda::caching_allocator(0);
  cuda::empty_cache(0);
  const MemorySnapshot before = memory_snapshot(kGpu);
  auto step = [] {
    MemoryTagScope scope(MemoryTag::Activations);
    std::vector<Tensor> live;
    for (int64_t n : {7, 1000, 4096, 300001, 1 << 22}) live.push_back(Tensor::empty({n}, DType::F32, kGpu));
    const Tensor a = Tensor::ones({333, 77}, DType::BF16, kGpu);
    live.push_back(a.t().to(DType::F32));  // a strided device copy's output
  };
  for (int i = 0; i < 3; ++i) step();
  const int64_t warmed = allocator.info().device_mallocs;
  const int64_t reserved = memory_snapshot(kGpu).reserved;
  for (int i = 0; i < 50; ++i) step();
  CHECK(allocator.info().device_mallocs == warmed);
  CHECK(memory_snapshot(kGpu).reserved == reserved);

  {
    MemoryTagScope scope(MemoryTag::Gradients);
    const Tensor g = Tensor::empty({1001}, DType::F16, kGpu);
    const MemorySnapshot s = memory_snapshot(kGpu);
    CHECK(s[MemoryTag::Gradients].current == before[MemoryTag::Gradients].current + 2002);  // requested bytes
    CHECK(s.reserved >= s.total.current);
  }
  const MemorySnapshot after = memory_snapshot(kGpu);
  CHECK(after.total.current == before.total.current);
  CHECK(after[MemoryTag::Activations].peak >=
        before[MemoryTag::Activations].current + 4 * (7 + 1000 + 4096 + 300001 + (1 << 22)));
  cuda::synchronize_device(0);
  cuda::empty_cache(0);
  CHECK(allocator.info().cached_bytes == 0);
  CHECK(allocator.info().device_frees > 0);
  CHECK(memory_snapshot(kGpu).reserved < reserved);
}

TEST_CASE("poisoned device allocations read as NaN and -1", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  PoisonScope poison(true);
  const Tensor f = Tensor::empty({513}, DType::F32, kGpu);
  for (float v : f.to_vector<float>()) REQUIRE(std::isnan(v));
  const Tensor h = Tensor::empty({77}, DType::BF16, kGpu);
  for (float v : h.to(DType::F32).to_vector<float>()) REQUIRE(std::isnan(v));
  const Tensor i = Tensor::empty({9}, DType::I64, kGpu);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>(9, -1));
}

TEST_CASE("a device out of memory names the sizes and the fixes", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const std::string message = testing::error_of([] {
    MemoryTagScope scope(MemoryTag::Activations);
    Tensor::empty({int64_t{1} << 48}, DType::Bool, kGpu);  // 256 TiB
  });
  CHECK_THAT(message, Catch::StartsWith("out of memory on cuda:0 allocating 256.0 TiB (281474976710656 bytes) for "
                                        "activations ("));
  CHECK_THAT(message, Catch::Contains("activation checkpointing"));
  // The allocator still works afterwards.
  CHECK(Tensor::full({3}, 4.0, DType::F32, kGpu).to_vector<float>() == std::vector<float>(3, 4.0f));
}
