#pragma once
// Binary elementwise ops on tensors, with numpy broadcasting. Each op checks devices, dtypes
// and shapes (errors name both shapes), allocates the output and dispatches to the CPU or
// CUDA kernel. (The full op family and its registry grow from here.)

#include "core/tensor.h"

namespace fathom {

Tensor add(const Tensor& a, const Tensor& b);
// out (+)= a + b with a and b broadcast to out's shape; out may be any strided view.
void add_into(const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate = false);

}  // namespace fathom
