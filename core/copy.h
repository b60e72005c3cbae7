#pragma once
// Element copies between tensors of any layout, dtype and device; the one place where
// dtype conversion happens, by core/convert.h's rule on the CPU and on a GPU alike
// (f32 -> f16/bf16 rounds to nearest even, keeping NaN and Inf; float -> integer truncates
// toward zero and saturates, NaN -> 0; anything -> bool is "non-zero").

#include "core/tensor.h"

namespace fathom {

// dst[i] = convert(src broadcast to dst's shape)[i], on any devices. Within a GPU it is one
// kernel on cuda::current_stream(). Across devices the source is made contiguous on its own
// device, its bytes are copied, and the destination converts and lays them out on its side
// (no staging when the layouts and dtypes already agree); it returns once the data has arrived.
void copy_into(const Tensor& dst, const Tensor& src);
// Every element of dst set to `value` converted to dst's dtype.
void fill(const Tensor& dst, double value);

}  // namespace fathom
