#pragma once
// Element copies between tensors of any layout, dtype and device; the one place where
// dtype conversion happens (f32 -> f16/bf16 rounds to nearest even, keeping NaN and Inf;
// float -> integer truncates toward zero; anything -> bool is "non-zero").

#include "core/tensor.h"

namespace fathom {

// dst[i] = convert(src broadcast to dst's shape)[i]. Both on the CPU, or a plain byte copy of
// two contiguous same-dtype tensors across devices.
void copy_into(const Tensor& dst, const Tensor& src);
// Every element of dst set to `value` converted to dst's dtype.
void fill(const Tensor& dst, double value);

}  // namespace fathom
