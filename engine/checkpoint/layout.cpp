#include "engine/checkpoint/layout.h"

#include <algorithm>
#include <cstdio>

#include "core/xxhash64.h"

namespace fathom {

zero::Range checkpoint_saved_range(int64_t numel, int world, int rank, int stage) {
  if (stage == 0) return rank == 0 ? zero::Range{0, numel} : zero::Range{0, 0};
  return zero::Partition(numel, world).owned(rank);
}

int64_t copy_flat_overlap(const Tensor& source, zero::Range source_range, const Tensor& target, zero::Range target_range) {
  const zero::Range overlap{std::max(source_range.begin, target_range.begin),
                            std::min(source_range.end, target_range.end)};
  if (overlap.size() == 0) return 0;
  target.narrow(0, overlap.begin - target_range.begin, overlap.size())
      .copy_(source.narrow(0, overlap.begin - source_range.begin, overlap.size()));
  return overlap.size();
}

uint64_t checkpoint_checksum(const Tensor& tensor) {
  const Tensor bytes = tensor.contiguous();
  return xxhash64(bytes.raw_data(), bytes.nbytes());
}

std::string checksum_hex(uint64_t checksum) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(checksum));
  return text;
}

std::string checkpoint_state_kind(const std::string& state) { return state.substr(0, state.find('.')); }

std::string checkpoint_file_name(const parallel::GridCoord& coord, const parallel::Topology& topology,
                                 const std::string& kind) {
  char name[96];
  std::snprintf(name, sizeof name, "rank_%05d", coord.data);
  std::string out = name;
  if (topology.size(parallel::Axis::Tensor) > 1) {
    std::snprintf(name, sizeof name, ".tp%02d", coord.tensor);
    out += name;
  }
  if (topology.size(parallel::Axis::Pipeline) > 1) {
    std::snprintf(name, sizeof name, ".pp%02d", coord.pipeline);
    out += name;
  }
  return out + "." + kind + ".safetensors";
}

std::string checkpoint_file_name(int data_rank, const std::string& kind) {
  return checkpoint_file_name({0, data_rank, 0}, parallel::Topology(data_rank + 1), kind);
}

}  // namespace fathom
