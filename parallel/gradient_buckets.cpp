#include "parallel/gradient_buckets.h"

#include <algorithm>

#include "core/error.h"

namespace fathom::parallel {

GradientBuckets::GradientBuckets(const std::vector<int64_t>& sizes, int64_t capacity, const std::vector<int>& kinds)
    : bucket_of_(sizes.size()), offset_(sizes.size()), ready_(sizes.size()) {
  FATHOM_CHECK(capacity > 0, "gradient buckets: the bucket size must be > 0 elements, got ", capacity,
               " (zero_optimization.reduce_bucket_size)");
  FATHOM_CHECK(kinds.empty() || kinds.size() == sizes.size(), "gradient buckets: ", kinds.size(), " kinds for ",
               sizes.size(), " items");
  for (size_t item = sizes.size(); item-- > 0;) {
    const bool new_kind = !kinds.empty() && item + 1 < sizes.size() && kinds[item] != kinds[item + 1];
    if (buckets_.empty() || buckets_.back().elements + sizes[item] > capacity || new_kind) buckets_.emplace_back();
    Bucket& bucket = buckets_.back();
    bucket_of_[item] = buckets_.size() - 1;
    offset_[item] = bucket.elements;
    bucket.members.push_back(item);
    bucket.elements += sizes[item];
  }
}

void GradientBuckets::reset() {
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& bucket : buckets_) bucket.ready = 0;
  next_launch_ = 0;
}

bool GradientBuckets::mark_ready(size_t item) {
  if (ready_[item]) return false;
  ready_[item] = true;
  ++buckets_[bucket_of_[item]].ready;
  return true;
}

std::optional<size_t> GradientBuckets::next_launchable() {
  if (next_launch_ == buckets_.size() || buckets_[next_launch_].ready < buckets_[next_launch_].members.size())
    return std::nullopt;
  return next_launch_++;
}

}  // namespace fathom::parallel
