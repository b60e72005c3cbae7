#include "engine/memory_report.h"

#include <cstdio>

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

namespace {
std::string human(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) value /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}
}  // namespace

std::string format_model_state_bytes(const ModelStateBytes& b) {
  return "parameters " + human(b.parameters) + " | gradients " + human(b.gradients) + " | master weights " +
         human(b.master_weights) + " | optimizer states " + human(b.optimizer_states) + " | communication " +
         human(b.communication) + " | model states " + human(b.model_states());
}

}  // namespace fathom
