#pragma once
// Builds the CopyLayout of a device copy from the destination's shape and both operands'
// strides, merging dims so that the kernel does as little index arithmetic as possible: size-1
// dims are dropped, and an outer dim folds into the next inner one when both operands step
// over the pair as one (outer stride == inner stride * inner size), e.g. a contiguous tensor
// becomes one dim and a transposed one stays two. Host code, no CUDA: tested on the CPU.

#include "core/cuda/copy_kernels.h"
#include "core/shape.h"

namespace fathom::cuda {

// `src_strides` are already broadcast to `sizes` (0 on broadcast dims). Throws if more than
// kMaxCopyDims dims remain after merging.
CopyLayout make_copy_layout(const Shape& sizes, const Strides& dst_strides, const Strides& src_strides);

}  // namespace fathom::cuda
