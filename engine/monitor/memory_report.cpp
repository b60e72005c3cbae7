#include "engine/monitor/memory_report.h"

#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/cuda_runtime.h"
#include "offload/host_memory.h"

namespace fathom {

namespace {

// Every allocator of this process by name: the CPU's, offload's host tier and pinned memory, each
// GPU's.
struct NamedSnapshot {
  std::string name;
  MemorySnapshot snapshot;
  bool listed_when_empty = true;  // offload's tiers appear in the breakdown only when they hold bytes
  const MemoryCounter& operator[](MemoryTag tag) const { return snapshot[tag]; }
};
std::vector<NamedSnapshot> every_device() {
  std::vector<NamedSnapshot> snapshots{{"host", memory_snapshot(kCPU)},
                                       {"host tier", offload::host_tier_allocator(false).stats().snapshot(), false},
                                       {"pinned", offload::host_tier_allocator(true).stats().snapshot(), false}};
  for (int device = 0; device < cuda::device_count(); ++device)
    snapshots.push_back({Device::cuda(device).str(), memory_snapshot(Device::cuda(device))});
  return snapshots;
}

int64_t tag_bytes(const std::vector<NamedSnapshot>& snapshots, MemoryTag tag, bool peak) {
  int64_t sum = 0;
  for (const NamedSnapshot& s : snapshots) sum += peak ? s[tag].peak : s[tag].current;
  return sum;
}

}  // namespace

ModelStateBytes model_state_bytes(bool peak) {
  const std::vector<NamedSnapshot> snapshots = every_device();
  const auto bytes = [&](MemoryTag tag) { return tag_bytes(snapshots, tag, peak); };
  return {.parameters = bytes(MemoryTag::Parameters),
          .gradients = bytes(MemoryTag::Gradients),
          .master_weights = bytes(MemoryTag::MasterWeights),
          .optimizer_states = bytes(MemoryTag::OptimizerState),
          .communication = bytes(MemoryTag::Communication)};
}

std::string format_model_state_bytes(const ModelStateBytes& b) {
  return "parameters " + format_bytes(b.parameters) + " | gradients " + format_bytes(b.gradients) +
         " | master weights " + format_bytes(b.master_weights) + " | optimizer states " +
         format_bytes(b.optimizer_states) + " | communication " + format_bytes(b.communication) +
         " | model states " + format_bytes(b.model_states());
}

std::string format_memory_breakdown(const std::string& point) {
  const std::vector<NamedSnapshot> snapshots = every_device();
  std::string line = "memory after " + point;
  int64_t total = 0;
  for (int t = 0; t < kNumMemoryTags; ++t) {
    const int64_t bytes = tag_bytes(snapshots, static_cast<MemoryTag>(t), false);
    line += std::string(" | ") + memory_tag_name(static_cast<MemoryTag>(t)) + " " + format_bytes(bytes);
    total += bytes;
  }
  line += " | total " + format_bytes(total) + " (";
  for (size_t i = 0; i < snapshots.size(); ++i) {
    const int64_t bytes = snapshots[i].snapshot.total.current;
    if (snapshots[i].listed_when_empty || bytes > 0)
      line += (i == 0 ? "" : ", ") + snapshots[i].name + " " + format_bytes(bytes);
  }
  return line + ")";
}

}  // namespace fathom
