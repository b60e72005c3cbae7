#pragma once
// CUDA entry point of the overflow check (has_inf_or_nan, kernels/optimizer_kernels.h; its CPU
// twin has_inf_or_nan_cpu is declared there). A header of its own because .cu files cannot
// include optimizer_kernels.h (it includes core/tensor.h).

#include <cstdint>

#include "core/dtype.h"
#include "kernels/elementwise_kernels.h"

namespace fathom::kernels {

// One tensor to scan: its elements at layout's operand-0 offsets (any strides).
struct NonFiniteScan {
  DType dtype = DType::F32;  // f32, f64, f16 or bf16
  const void* data = nullptr;
  ElementwiseLayout layout;
};

// Clears `flag` (one device int32), then launches one kernel per tensor that sets it to 1 on
// finding an Inf or NaN; all on `stream`. The caller reads the flag once afterwards.
void flag_inf_or_nan_cuda(const NonFiniteScan* scans, int64_t count, int32_t* flag, void* stream);

}  // namespace fathom::kernels
