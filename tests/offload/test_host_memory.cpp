// The host tier (offload/host_memory.h): its own counters, page-aligned blocks, the scope that
// places host tensors there, the shared per-rank memory cap; and the TensorSwapper that moves
// groups of its tensors through swap files, releasing their memory between uses.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "core/allocator.h"
#include "core/memory_stats.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "offload/host_memory.h"
#include "offload/tensor_swapper.h"

using namespace fathom;
namespace fs = std::filesystem;

TEST_CASE("host tier: own counters, page-aligned blocks, chosen by a scope", "[offload]") {
  Allocator& cpu = allocator_for(kCPU);
  for (bool pinned : {false, true}) {
    Allocator& tier = offload::host_tier_allocator(pinned);
    const int64_t cpu_before = cpu.stats().snapshot()[MemoryTag::OptimizerState].current;
    const int64_t tier_before = tier.stats().snapshot()[MemoryTag::OptimizerState].current;
    {
      MemoryTagScope tag(MemoryTag::OptimizerState);
      offload::HostTierScope scope(pinned);
      const Tensor t = Tensor::zeros({1000});
      CHECK(t.storage()->allocator() == &tier);
      CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % offload::kHostTierAlignment == 0);
      CHECK(tier.stats().snapshot()[MemoryTag::OptimizerState].current == tier_before + 4000);
      CHECK(cpu.stats().snapshot()[MemoryTag::OptimizerState].current == cpu_before);
      // Released and refilled: the block comes back from the same allocator.
      t.storage()->release();
      CHECK(tier.stats().snapshot()[MemoryTag::OptimizerState].current == tier_before);
      t.storage()->refill();
      CHECK(tier.stats().snapshot()[MemoryTag::OptimizerState].current == tier_before + 4000);
    }
    CHECK(tier.stats().snapshot()[MemoryTag::OptimizerState].current == tier_before);
    // Outside the scope host tensors come from the CPU device's allocator again.
    CHECK(Tensor::zeros({10}).storage()->allocator() == &cpu);
  }
}

TEST_CASE("the memory cap counts the host tier with the CPU device's bytes", "[offload]") {
  const int64_t previous = cpu_memory_limit();
  const int64_t live = CpuAllocator::live_host_bytes();
  set_cpu_memory_limit(live + (int64_t{3} << 20));  // 3 MiB more than now
  {
    const Tensor on_device = Tensor::empty({int64_t{1} << 19});  // 2 MiB
    offload::HostTierScope scope(false);
    CHECK_THROWS_WITH(Tensor::empty({int64_t{1} << 19}), Catch::Contains("out of host memory") &&
                                                             Catch::Contains("in the host tier") &&
                                                             Catch::Contains("FATHOM_CPU_MEMORY_LIMIT_MB"));
  }
  set_cpu_memory_limit(previous);
}

TEST_CASE("TensorSwapper: groups out to files and back, memory released between", "[offload]") {
  const std::string directory = (fs::current_path() / "swapper-test" / "nested").string();
  fs::remove_all(fs::current_path() / "swapper-test");
  Allocator& tier = offload::host_tier_allocator(false);
  MemoryTagScope tag(MemoryTag::OptimizerState);
  offload::HostTierScope scope(false);
  const int64_t before = tier.stats().snapshot()[MemoryTag::OptimizerState].current;
  {
    offload::TensorSwapper swapper(directory, {});
    const Tensor a = Tensor::arange(3000);  // not a whole page
    const Tensor b = Tensor::full({5}, 2.5);
    const std::vector<float> a_values = a.to_vector<float>(), b_values = b.to_vector<float>();
    const size_t group = swapper.add_group();
    CHECK_FALSE(swapper.holds_state(group));
    swapper.begin_swap_out(group, {a, b});
    swapper.finish_swap_out(group);
    CHECK(swapper.holds_state(group));
    CHECK(a.storage()->is_released());
    CHECK(tier.stats().snapshot()[MemoryTag::OptimizerState].current == before);
    swapper.begin_swap_in(group, {a, b});
    swapper.finish_swap_in(group);
    CHECK(a.to_vector<float>() == a_values);
    CHECK(b.to_vector<float>() == b_values);
    CHECK(swapper.engine().counters().bytes_written > 0);
    // A tensor outside the host tier cannot be swapped (it is no O_DIRECT buffer).
    HostAllocatorScope plain(allocator_for(kCPU));
    CHECK_THROWS_WITH(swapper.begin_swap_out(swapper.add_group(), {Tensor::zeros({4})}),
                      Catch::Contains("must live in the host tier"));
  }
  // Its files and the directories it made are gone.
  CHECK_FALSE(fs::exists(fs::current_path() / "swapper-test"));
}
