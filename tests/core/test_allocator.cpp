#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>

#include "core/allocator.h"
#include "core/tensor.h"

using namespace fathom;

namespace {
int64_t current(MemoryTag tag) { return memory_snapshot()[tag].current; }
}  // namespace

TEST_CASE("CPU allocations are 64-byte aligned and counted exactly per tag", "[core]") {
  const int64_t params_before = current(MemoryTag::Parameters);
  const int64_t other_before = current(MemoryTag::Other);
  {
    MemoryTagScope scope(MemoryTag::Parameters);
    const Tensor w = Tensor::empty({3, 5});  // 60 bytes
    CHECK(reinterpret_cast<uintptr_t>(w.raw_data()) % 64 == 0);
    CHECK(current(MemoryTag::Parameters) == params_before + 60);
    {
      MemoryTagScope inner(MemoryTag::Gradients);
      const Tensor g = Tensor::empty({7}, DType::F64);
      CHECK(current(MemoryTag::Gradients) >= 56);
    }
    CHECK(MemoryTagScope::current() == MemoryTag::Parameters);  // scopes nest and restore
  }
  CHECK(current(MemoryTag::Parameters) == params_before);
  CHECK(MemoryTagScope::current() == MemoryTag::Other);
  const Tensor plain = Tensor::empty({4}, DType::I64);
  CHECK(current(MemoryTag::Other) == other_before + 32);
}

TEST_CASE("peaks track the high-water mark and reset to current", "[core]") {
  Allocator& cpu = allocator_for(kCPU);
  cpu.stats().reset_peak();
  const int64_t base = memory_snapshot().total.current;
  {
    MemoryTagScope scope(MemoryTag::Activations);
    const Tensor a = Tensor::empty({1000});  // 4000 bytes
    { const Tensor b = Tensor::empty({500}); }  // +2000, freed
    const MemorySnapshot snap = memory_snapshot();
    CHECK(snap[MemoryTag::Activations].peak >= 6000);
    CHECK(snap.total.peak - base == 6000);
    CHECK(snap.total.current - base == 4000);
    cpu.stats().reset_peak();
    CHECK(memory_snapshot().total.peak - base == 4000);
  }
  CHECK(memory_snapshot().total.current == base);
}

TEST_CASE("retag moves bytes between counters", "[core]") {
  const int64_t acts = current(MemoryTag::Activations);
  const int64_t grads = current(MemoryTag::Gradients);
  Tensor t;
  {
    MemoryTagScope scope(MemoryTag::Activations);
    t = Tensor::empty({256});
  }
  CHECK(current(MemoryTag::Activations) == acts + 1024);
  t.storage()->retag(MemoryTag::Gradients);  // e.g. a backward output adopted as a .grad
  CHECK(current(MemoryTag::Activations) == acts);
  CHECK(current(MemoryTag::Gradients) == grads + 1024);
  t = Tensor();
  CHECK(current(MemoryTag::Gradients) == grads);
}

TEST_CASE("release frees the bytes and refill charges them again", "[core]") {
  MemoryTagScope scope(MemoryTag::Parameters);
  const int64_t before = current(MemoryTag::Parameters);
  Tensor p = Tensor::zeros({128});
  CHECK(current(MemoryTag::Parameters) == before + 512);
  p.storage()->release();
  CHECK(current(MemoryTag::Parameters) == before);
  p.storage()->refill();
  CHECK(current(MemoryTag::Parameters) == before + 512);
}

TEST_CASE("tags are per thread", "[core]") {
  MemoryTagScope scope(MemoryTag::OptimizerState);
  MemoryTag seen = MemoryTag::Parameters;
  std::thread([&] { seen = MemoryTagScope::current(); }).join();
  CHECK(seen == MemoryTag::Other);
  CHECK(std::string(memory_tag_name(MemoryTag::OptimizerState)) == "optimizer_state");
}

TEST_CASE("external memory is wrapped without being counted", "[core]") {
  std::vector<float> buffer = {1, 2, 3};
  bool deleted = false;
  const int64_t before = memory_snapshot().total.current;
  {
    auto storage = Storage::wrap_external(buffer.data(), 12, kCPU, [&](void*) { deleted = true; });
    const Tensor t(storage, {3}, {1}, 0, DType::F32);
    CHECK(t.to_vector<float>() == buffer);
    CHECK(memory_snapshot().total.current == before);
    CHECK_THROWS_WITH(storage->release(), Catch::Contains("cannot release externally owned memory"));
  }
  CHECK(deleted);
}

TEST_CASE("large host blocks are cached for reuse and counted as reserved, not current", "[core]") {
  auto& cpu = static_cast<CpuAllocator&>(allocator_for(kCPU));
  cpu.empty_cache();
  const MemorySnapshot before = memory_snapshot();
  const void* first = nullptr;
  {
    const Tensor big = Tensor::empty({1 << 20});  // 4 MiB
    first = big.raw_data();
    CHECK(memory_snapshot().total.current - before.total.current == 4 << 20);
  }
  CHECK(memory_snapshot().total.current == before.total.current);
  CHECK(cpu.cached_bytes() == size_t{4} << 20);
  CHECK(memory_snapshot().reserved - before.reserved == 4 << 20);
  {
    const Tensor again = Tensor::empty({1 << 20});  // same size: the cached block, no new memory
    CHECK(again.raw_data() == first);
    CHECK(cpu.cached_bytes() == 0);
  }
  cpu.empty_cache();
  CHECK(cpu.cached_bytes() == 0);
  CHECK(memory_snapshot().reserved == before.reserved);
}

TEST_CASE("the CPU allocator memory limit caps live bytes, lets cached blocks go, and names the tags in use",
          "[core]") {
  struct RestoreLimit {
    ~RestoreLimit() { set_cpu_memory_limit(0); }
  } restore;
  auto& cpu = static_cast<CpuAllocator&>(allocator_for(kCPU));
  REQUIRE(cpu_memory_limit() == 0);  // FATHOM_CPU_MEMORY_LIMIT_MB unset
  { const Tensor cached = Tensor::empty({1 << 20}); }  // 4 MiB, kept in the cache when freed
  REQUIRE(cpu.cached_bytes() >= size_t{4} << 20);
  const int64_t base = memory_snapshot().total.current;
  set_cpu_memory_limit(base + (1 << 20));  // 1 MiB of headroom; the 4 MiB in the cache are let go for it
  CHECK(cpu_memory_limit() == base + (1 << 20));
  {
    MemoryTagScope scope(MemoryTag::Gradients);
    const Tensor fits = Tensor::empty({(1 << 18) - 16});  // 1 MiB - 64 bytes
    CHECK(memory_snapshot().total.current == base + (1 << 20) - 64);
    CHECK(cpu.cached_bytes() == 0);  // live and cached bytes together stay under the limit
    const std::string in_use = std::to_string(base + (1 << 20) - 64) + " bytes in use: ";
    const std::string gradients = "gradients " + std::to_string(current(MemoryTag::Gradients));
    CHECK_THROWS_WITH(Tensor::empty({32}, DType::F32),  // 128 bytes: 64 too many
                      Catch::Contains("out of host memory: allocating 128 bytes for gradients would exceed the limit "
                                      "of " + std::to_string(base + (1 << 20)) +
                                      " bytes (FATHOM_CPU_MEMORY_LIMIT_MB); " + in_use) &&
                          Catch::Contains(gradients));
    CHECK(memory_snapshot().total.current == base + (1 << 20) - 64);  // the failed allocation took nothing
    const Tensor exact = Tensor::empty({16});                        // 64 bytes: exactly at the limit
    CHECK(memory_snapshot().total.current == base + (1 << 20));
  }
  {
    MemoryTagScope scope(MemoryTag::Activations);
    CHECK_THROWS_WITH(Tensor::empty({1 << 20}), Catch::Contains("out of host memory: allocating 4194304 bytes for "
                                                                 "activations would exceed the limit"));
  }
  set_cpu_memory_limit(0);
  const Tensor unlimited = Tensor::empty({1 << 20});
  CHECK(memory_snapshot().total.current == base + (4 << 20));
  CHECK_THROWS_WITH(set_cpu_memory_limit(-1), Catch::Contains("expected >= 0"));
}

TEST_CASE("under a memory limit live and cached bytes together never pass it", "[core]") {
  struct RestoreLimit {
    ~RestoreLimit() { set_cpu_memory_limit(0); }
  } restore;
  auto& cpu = static_cast<CpuAllocator&>(allocator_for(kCPU));
  cpu.empty_cache();
  const int64_t base = memory_snapshot().total.current;
  const int64_t limit = base + (8 << 20);
  set_cpu_memory_limit(limit);
  // Blocks of sizes that never match a cached one: each new size must make room first.
  const Tensor held = Tensor::empty({1 << 20});  // 4 MiB, live throughout
  for (int64_t quarter_mib : {4, 8, 12, 16, 6, 10, 14}) {
    { const Tensor block = Tensor::empty({quarter_mib << 16}); }
    INFO(quarter_mib << " quarter-MiB blocks");
    CHECK(memory_snapshot().total.current + static_cast<int64_t>(cpu.cached_bytes()) <= limit);
  }
  CHECK(cpu.cached_bytes() > 0);  // the cache still works below the limit
  cpu.empty_cache();
}
