#include "engine/memory_report.h"


#include <vector>

#include "core/allocator.h"
#include "core/cuda/cuda_runtime.h"

namespace fathom {

ModelStateBytes model_state_bytes(bool peak) {
  std::vector<MemorySnapshot> snapshots{memory_snapshot(kCPU)};
  for (int device = 0; device < cuda::device_count(); ++device) snapshots.push_back(memory_snapshot(Device::cuda(device)));
  const auto bytes = [&](MemoryTag tag) {
    int64_t sum = 0;
    for (const MemorySnapshot& s : snapshots) sum += peak ? s[tag].peak : s[tag].current;
    return sum;
  };
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

}  // namespace fathom
