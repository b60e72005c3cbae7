#pragma once
// Kernel entry point of the reductions (CPU). The layout splits the input's dims into kept
// ones (one output element per index) and reduced ones (walked in row-major order).

#include "core/dtype.h"
#include "core/shape.h"
#include "kernels/reduction.h"

namespace fathom::kernels {

struct ReduceLayout {
  Shape kept_sizes;         // output element order
  Strides kept_strides;     // input strides of the kept dims
  Shape reduced_sizes;
  Strides reduced_strides;  // input strides of the reduced dims
};

// out: contiguous, one element per kept index, of dtype `out_dtype`.
void reduce_cpu(ReduceOp op, DType in_dtype, DType out_dtype, void* out, const void* in, const ReduceLayout& layout,
                int64_t correction);

}  // namespace fathom::kernels
