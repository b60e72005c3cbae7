#pragma once
// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_ and DeepSpeed's
// "gradient_clipping": the norm is taken over all gradients together (f64 accumulation, in list
// order), and when max_norm / (norm + 1e-6) < 1 every gradient is scaled in place by that factor.
//
// A NaN or Inf norm is returned and the gradients are left alone (torch would multiply them by
// NaN): with fp16 loss scaling the step is about to be skipped anyway, and the caller can see
// the overflow in the returned value. Parameters without a gradient are ignored.

#include <vector>

#include "autograd/variable.h"

namespace fathom::nn {

// Returns the total norm of the gradients before clipping. max_norm must be > 0.
double clip_grad_norm(const std::vector<autograd::Variable>& params, double max_norm);

}  // namespace fathom::nn
