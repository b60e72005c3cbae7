#pragma once
// Gradient checking: the analytic gradient of a function of Variables against central finite
// differences, in f64.

#include <functional>
#include <string>

#include "autograd/variable.h"

namespace fathom::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-5;
  uint64_t seed = 0;  // for the random output weights
};

// Checks d/d(inputs) of L = sum(fn(inputs) * W) for a random fixed W. Inputs that require grad
// must be f64. Returns "" when every gradient matches, else a description of the first mismatch.
std::string gradcheck(const std::function<Variable(const VariableList&)>& fn, const VariableList& inputs,
                      const GradcheckOptions& options = {});

}  // namespace fathom::autograd
