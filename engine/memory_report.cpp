#include "engine/memory_report.h"

#include <vector>

#include "core/allocator.h"
#include "core/cuda/cuda_runtime.h"
#include "offload/host_memory.h"

namespace fathom {

namespace {

// Every allocator of this process: the CPU's, offload's host tier and pinned memory, each GPU's.
std::vector<MemorySnapshot> every_device() {
  std::vector<MemorySnapshot> snapshots{memory_snapshot(kCPU), offload::host_tier_allocator(false).stats().snapshot(),
                                        offload::host_tier_allocator(true).stats().snapshot()};
  for (int device = 0; device < cuda::device_count(); ++device) snapshots.push_back(memory_snapshot(Device::cuda(device)));
  return snapshots;
}

int64_t tag_bytes(const std::vector<MemorySnapshot>& snapshots, MemoryTag tag, bool peak) {
  int64_t sum = 0;
  for (const MemorySnapshot& s : snapshots) sum += peak ? s[tag].peak : s[tag].current;
  return sum;
}

}  // namespace

ModelStateBytes model_state_bytes(bool peak) {
  const std::vector<MemorySnapshot> snapshots = every_device();
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
  const std::vector<MemorySnapshot> snapshots = every_device();
  std::string line = "memory after " + point;
  int64_t total = 0;
  for (int t = 0; t < kNumMemoryTags; ++t) {
    const int64_t bytes = tag_bytes(snapshots, static_cast<MemoryTag>(t), false);
    line += std::string(" | ") + memory_tag_name(static_cast<MemoryTag>(t)) + " " + format_bytes(bytes);
    total += bytes;
  }
  line += " | total " + format_bytes(total) + " (host " + format_bytes(snapshots[0].total.current);
  if (snapshots[1].total.current > 0) line += ", host tier " + format_bytes(snapshots[1].total.current);
  if (snapshots[2].total.current > 0) line += ", pinned " + format_bytes(snapshots[2].total.current);
  for (size_t d = 3; d < snapshots.size(); ++d)
    line += ", cuda:" + std::to_string(d - 3) + " " + format_bytes(snapshots[d].total.current);
  return line + ")";
}

}  // namespace fathom
