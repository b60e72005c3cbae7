#include "zero/partition.h"

#include <algorithm>

#include "core/error.h"

namespace fathom::zero {

Partition::Partition(int64_t numel, int world_size) : numel_(numel), world_size_(world_size) {
  FATHOM_CHECK(numel >= 0, "partition: numel must be >= 0, got ", numel);
  FATHOM_CHECK(world_size >= 1, "partition: world size must be >= 1, got ", world_size);
  shard_size_ = (numel + world_size - 1) / world_size;
}

Range Partition::owned(int rank) const {
  const Range s = shard(rank);
  return {std::min(s.begin, numel_), std::min(s.end, numel_)};
}

std::vector<int64_t> Partition::counts_within(const Range& range) const {
  std::vector<int64_t> counts(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    const Range o = owned(r);
    counts[r] = Range{std::max(o.begin, range.begin), std::min(o.end, range.end)}.size();
  }
  return counts;
}

}  // namespace fathom::zero
