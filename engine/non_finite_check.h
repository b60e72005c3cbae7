#pragma once
// Stopping on a non-finite step. Outside fp16's loss scaling (where an overflow skips the step by
// design), a NaN or Inf loss or gradient norm means the run has diverged or its weights or data
// hold NaN/Inf: the engine stops before the optimizer writes it into the weights, as Megatron
// does by default, so the weights and the last checkpoint stay as they were.
// Engine::set_stop_on_non_finite(false) (fathom-train --allow-non-finite) trains on regardless.

#include <cstdint>
#include <string>

#include "nn/module.h"

namespace fathom {

// The error for optimizer step `step` whose job-wide loss or gradient norm is not finite: both
// values, and the first parameter whose values (on this rank) hold NaN/Inf, or that every weight
// is finite and so the gradients are where it went wrong.
std::string non_finite_step_message(int64_t step, double loss, double grad_norm, const nn::Module& model);

}  // namespace fathom
