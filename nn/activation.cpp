#include "nn/activation.h"

#include "autograd/functions.h"

namespace fathom::nn {

Variable GELU::forward(const Variable& x) { return autograd::gelu(x, approximate); }

}  // namespace fathom::nn
