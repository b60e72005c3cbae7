#include "engine/data/sample_map.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

SampleMap::SampleMap(int64_t num_samples, int64_t micro_batch_size, int64_t gradient_accumulation_steps,
                     int64_t dp_world_size, bool drop_last)
    : num_samples_(num_samples),
      micro_(micro_batch_size),
      gas_(gradient_accumulation_steps),
      dp_(dp_world_size),
      drop_last_(drop_last) {}

int64_t SampleMap::steps_per_epoch() const {
  const int64_t G = global_batch_size();
  return drop_last_ ? num_samples_ / G : (num_samples_ + G - 1) / G;
}

PositionRange SampleMap::global_batch(int64_t step) const {
  FATHOM_CHECK(step >= 0 && step < steps_per_epoch(), "SampleMap: step ", step, " is outside the epoch's ",
               steps_per_epoch(), " steps");
  const int64_t G = global_batch_size();
  return {step * G, std::min((step + 1) * G, num_samples_)};
}

PositionRange SampleMap::micro_batch(int64_t step, int64_t micro_step, int64_t dp_rank) const {
  FATHOM_CHECK(micro_step >= 0 && micro_step < gas_, "SampleMap: micro_step ", micro_step, " is outside the ", gas_,
               " gradient accumulation steps");
  FATHOM_CHECK(dp_rank >= 0 && dp_rank < dp_, "SampleMap: dp_rank ", dp_rank, " is outside the ", dp_, " ranks");
  const PositionRange batch = global_batch(step);
  const int64_t slot = micro_step * dp_ + dp_rank;
  if (batch.size() == global_batch_size())
    return {batch.begin + slot * micro_, batch.begin + (slot + 1) * micro_};
  // A short tail: spread it over all slots, the first (size mod slots) getting one extra.
  const int64_t slots = gas_ * dp_;
  const int64_t base = batch.size() / slots, extra = batch.size() % slots;
  const int64_t begin = batch.begin + slot * base + std::min(slot, extra);
  return {begin, begin + base + (slot < extra ? 1 : 0)};
}

}  // namespace fathom
