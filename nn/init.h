#pragma once
// Parameter initialisation, in place and without recording a graph. Deterministic: values
// come from the Philox generator passed in, so the same seed gives the same model everywhere.

#include "autograd/variable.h"
#include "core/generator.h"

namespace fathom::nn::init {

void normal_(const autograd::Variable& parameter, Generator& gen, double mean = 0.0, double std = 1.0);
void uniform_(const autograd::Variable& parameter, Generator& gen, double low, double high);
void constant_(const autograd::Variable& parameter, double value);
inline void zeros_(const autograd::Variable& parameter) { constant_(parameter, 0.0); }
inline void ones_(const autograd::Variable& parameter) { constant_(parameter, 1.0); }

}  // namespace fathom::nn::init
