#pragma once
// GradientBuckets: how gradients are grouped for reduction while backward runs, shared by data
// parallelism at stage 0 (all-reduce, parallel/gradient_reducer.h) and ZeRO stages 2-3
// (reduce-scatter, zero/sharded_state.h).
//
// Items (parameters, in model order) are packed in reverse — the order backward finishes
// them — into buckets of at most `capacity` elements; an item larger than that makes a bucket
// of its own, and a new bucket starts wherever `kinds` changes (gradients of another dtype).
// Per backward, items are marked ready as their gradients become final; buckets launch strictly
// in index order, once all their members are ready, so every rank issues the same collectives
// in the same order even when gradients become ready in another order.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace fathom::parallel {

class GradientBuckets {
 public:
  // `kinds`: empty (all alike) or one per item.
  GradientBuckets(const std::vector<int64_t>& sizes, int64_t capacity, const std::vector<int>& kinds = {});

  size_t size() const { return buckets_.size(); }
  // A bucket's items in fill order (the last model parameter first), and its element count.
  const std::vector<size_t>& members(size_t bucket) const { return buckets_[bucket].members; }
  int64_t elements(size_t bucket) const { return buckets_[bucket].elements; }
  size_t bucket_of(size_t item) const { return bucket_of_[item]; }
  // Where the item starts in its bucket when members are laid out in fill order.
  int64_t offset_in_bucket(size_t item) const { return offset_[item]; }

  // Readiness, per backward: reset() before it; mark_ready() as each item's gradient is final
  // (false when it already was); next_launchable() gives the next bucket in index order whose
  // members are all ready, or nothing.
  void reset();
  bool mark_ready(size_t item);
  bool is_ready(size_t item) const { return ready_[item]; }
  std::optional<size_t> next_launchable();
  size_t launched() const { return next_launch_; }

 private:
  struct Bucket {
    std::vector<size_t> members;
    int64_t elements = 0;
    size_t ready = 0;
  };
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<int64_t> offset_;
  std::vector<bool> ready_;
  size_t next_launch_ = 0;
};

}  // namespace fathom::parallel
