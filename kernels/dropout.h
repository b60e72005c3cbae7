#pragma once
// Dropout whose mask is a pure function of where an element sits in the unsharded,
// single-process tensor, so every parallel layout reproduces the single-process run.
//
// x is viewed as rows x width (width = its last dim). Element (r, c) is kept when
//   philox_word(seed, offset, sample_index[r] * full_width + column_offset + c) < ceil((1 - p) * 2^32)
// and then scaled by 1 / (1 - p); dropped elements are 0. sample_index (i64, one per row) is
// the row's global index (e.g. global sample * T + t), column_offset and full_width place a
// tensor-parallel shard inside the full feature dim (defaults: 0 and width). offset is the
// stream offset of this call (e.g. from the step, module id and call index). The mask is never
// stored: dropout_backward recomputes it.

#include <cstdint>

#include "core/tensor.h"

namespace fathom {

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& sample_index,
               int64_t column_offset = 0, int64_t full_width = -1);
// dx = dy * mask / (1 - p), the same mask as the forward with the same arguments.
Tensor dropout_backward(const Tensor& dy, double p, uint64_t seed, uint64_t offset, const Tensor& sample_index,
                        int64_t column_offset = 0, int64_t full_width = -1);
// dx (+)= that, into a contiguous tensor shaped and typed like dy (e.g. a gradient buffer).
void dropout_backward_into(const Tensor& dx, const Tensor& dy, double p, uint64_t seed, uint64_t offset,
                           const Tensor& sample_index, int64_t column_offset, int64_t full_width, bool accumulate);

}  // namespace fathom
