#pragma once
// Collation: samples stacked along a new first dimension into one micro-batch.

#include <cstdint>
#include <vector>

#include "engine/data/dataset.h"

namespace fathom {

// inputs [rows, ...input shape], targets [rows, ...target shape], contiguous CPU tensors.
// Every sample must match `like` (any sample of the dataset) in shape and dtype; `like` also
// gives the shapes when there are no rows. `indices[i]` is sample i's dataset index, for errors.
Sample collate(const std::vector<Sample>& samples, const std::vector<int64_t>& indices, const Sample& like);

}  // namespace fathom
