#pragma once
// How ZeRO cuts a flat buffer among the data-parallel ranks: `numel` elements padded up to a
// multiple of the world size, every rank owning one equal-size shard of the padded buffer, so
// that equal-size collectives (NCCL's) work. Only the shard's real part — the elements below
// numel — is ever updated, reduced or counted; the padding stays zero.
//
//   Partition p(10, 4);   // padded 12, shard 3: rank 0 [0,3) 1 [3,6) 2 [6,9) 3 [9,10)+2 padding

#include <cstdint>
#include <vector>

namespace fathom::zero {

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end > begin ? end - begin : 0; }
  friend bool operator==(const Range&, const Range&) = default;
};

class Partition {
 public:
  Partition(int64_t numel, int world_size);

  int64_t numel() const { return numel_; }
  int world_size() const { return world_size_; }
  int64_t shard_size() const { return shard_size_; }          // padded: equal on every rank
  int64_t padded_numel() const { return shard_size_ * world_size_; }
  // Rank r's shard in the padded buffer, and its real part (may be empty on the last ranks).
  Range shard(int rank) const { return {rank * shard_size_, (rank + 1) * shard_size_}; }
  Range owned(int rank) const;
  // For a range of the buffer, how many of its elements each rank owns (a v-collective's counts).
  std::vector<int64_t> counts_within(const Range& range) const;

 private:
  int64_t numel_;
  int world_size_;
  int64_t shard_size_;
};

}  // namespace fathom::zero
