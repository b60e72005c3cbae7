#pragma once
// Kernel entry points of the binary elementwise ops (CPU twin and CUDA). Raw pointers plus a
// BinaryLayout; `accumulate` adds the result into out instead of overwriting it, so backward
// kernels can write straight into gradient buffers. f16/bf16 compute in f32.

#include "core/dtype.h"
#include "kernels/elementwise_layout.h"

namespace fathom::kernels {

void add_forward_cpu(DType dtype, void* out, const void* a, const void* b, const BinaryLayout& layout, bool accumulate);
void add_forward_cuda(DType dtype, void* out, const void* a, const void* b, const BinaryLayout& layout, bool accumulate,
                      void* stream);

}  // namespace fathom::kernels
