#include "engine/checkpoint_layout.h"

#include <algorithm>
#include <cstdio>

namespace fathom::checkpoint {

zero::Range saved_range(int64_t numel, int world, int rank, int stage) {
  if (stage == 0) return rank == 0 ? zero::Range{0, numel} : zero::Range{0, 0};
  return zero::Partition(numel, world).owned(rank);
}

int64_t copy_overlap(const Tensor& source, zero::Range source_range, const Tensor& target, zero::Range target_range) {
  const zero::Range overlap{std::max(source_range.begin, target_range.begin),
                            std::min(source_range.end, target_range.end)};
  if (overlap.size() == 0) return 0;
  target.narrow(0, overlap.begin - target_range.begin, overlap.size())
      .copy_(source.narrow(0, overlap.begin - source_range.begin, overlap.size()));
  return overlap.size();
}

std::string checksum(const Tensor& tensor) {
  const Tensor bytes = tensor.contiguous();
  const auto* p = static_cast<const unsigned char*>(bytes.raw_data());
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < bytes.nbytes(); ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace fathom::checkpoint
