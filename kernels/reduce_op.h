#pragma once
// The reduction kinds, in a header of their own so the CUDA kernels (which must not include
// core/tensor.h) and the public API (kernels/reduction.h) name the same enum.

#include <cstdint>

namespace fathom {

// SumOfSquares always returns f64 (it feeds norms); ArgMax returns i64.
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, Var, ArgMax, SumOfSquares };

}  // namespace fathom
