#include "engine/data/shuffle.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/philox.h"

namespace fathom {

std::vector<int64_t> epoch_order(int64_t num_samples, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(num_samples));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  const uint64_t stream = kShuffleStreamBase + static_cast<uint64_t>(epoch);
  std::vector<std::pair<uint64_t, int64_t>> keyed(order.size());
  for (int64_t i = 0; i < num_samples; ++i) keyed[i] = {philox_pair(seed, stream, static_cast<uint64_t>(i)), i};
  std::sort(keyed.begin(), keyed.end());
  for (int64_t i = 0; i < num_samples; ++i) order[i] = keyed[i].second;
  return order;
}

}  // namespace fathom
