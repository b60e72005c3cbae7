#include "engine/data/dataset.h"

#include <vector>

namespace fathom {

int64_t Dataset::count_targets(int64_t index, int64_t ignore_index) const {
  return fathom::count_targets(get(index).target, ignore_index);
}

void Dataset::check_index(int64_t index, const char* dataset) const {
  FATHOM_CHECK(index >= 0 && index < size(), dataset, ": sample index ", index, " is out of range; the dataset has ",
               size(), " samples (valid indices 0..", size() - 1, ")");
}

int64_t count_targets(const Tensor& target, int64_t ignore_index) {
  if (is_floating_point(target.dtype())) return target.numel();
  int64_t count = 0;
  for (int64_t value : target.to_vector<int64_t>()) count += value != ignore_index;
  return count;
}

}  // namespace fathom
