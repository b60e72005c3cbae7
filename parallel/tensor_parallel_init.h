#pragma once
// The tensor-parallel layers' initialisation: the unsharded layer's, drawn whole on every rank
// from one generator (which advances identically on every rank that builds the same layers in the
// same order) and then sliced, so a model is the same function at every tensor-parallel size.

#include "core/generator.h"
#include "core/tensor.h"

namespace fathom::parallel {

// nn::Linear's default: U(-1/sqrt(in), 1/sqrt(in)) over the whole [out, in] weight, in `dtype`.
Tensor draw_full_linear_weight(int64_t in_features, int64_t out_features, DType dtype);

}  // namespace fathom::parallel
