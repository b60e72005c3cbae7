#include "engine/memory_report.h"

#include <vector>

#include "core/allocator.h"
#include "core/cuda/cuda_runtime.h"

namespace fathom {

namespace {

std::vector<MemorySnapshot> every_device() {
  std::vector<MemorySnapshot> snapshots{memory_snapshot(kCPU)};
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
  return line + " | total " + format_bytes(total);
}

}  // namespace fathom
