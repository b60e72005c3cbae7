#pragma once
// The deterministic token batches the model-parallel equivalence tests train on: step s's global
// batch of `rows` sequences of `length` token ids below `vocab`, their next tokens, and the rows'
// global sample indices (s · rows + r), so dropout draws the same masks under any layout.

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace fathom::testing {

struct GlobalBatch {
  Tensor inputs, targets, sample_index;
};

inline GlobalBatch token_batch(int step, int64_t rows, int64_t length, int64_t vocab) {
  std::vector<int64_t> ids(rows * length), next(rows * length), index(rows);
  for (int64_t i = 0; i < rows * length; ++i) ids[i] = (i * 131 + step * 17 + 5) % vocab;
  for (int64_t i = 0; i < rows * length; ++i) next[i] = (ids[i] * 7 + 1) % vocab;
  for (int64_t r = 0; r < rows; ++r) index[r] = step * rows + r;
  return {Tensor::from_vector(ids, {rows, length}), Tensor::from_vector(next, {rows, length}),
          Tensor::from_vector(index, {rows})};
}

}  // namespace fathom::testing
