#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"

namespace fathom::autograd {

std::string gradcheck(const std::function<Variable(const VariableList&)>& fn, const VariableList& inputs,
                      const GradcheckOptions& options) {
  for (const Variable& input : inputs)
    FATHOM_CHECK(!input.requires_grad() || input.dtype() == DType::F64,
                 "gradcheck: inputs that require grad must be f64, got ", dtype_name(input.dtype()));
  // Fresh leaves, so the caller's gradients are untouched.
  VariableList leaves;
  for (const Variable& input : inputs) leaves.push_back(Variable(input.data().clone(), input.requires_grad()));
  const Variable out = fn(leaves);
  Generator gen(options.seed);
  const Tensor weights = uniform(out.sizes(), gen, -1, 1, DType::F64);
  backward({out}, {weights});

  auto loss = [&](const VariableList& at) {
    NoGradGuard no_grad;
    const std::vector<double> y = fn(at).data().to_vector<double>();
    const std::vector<double> w = weights.to_vector<double>();
    double total = 0;
    for (size_t j = 0; j < y.size(); ++j) total += y[j] * w[j];
    return total;
  };
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].requires_grad()) continue;
    const Tensor analytic = leaves[i].grad();
    if (!analytic.defined()) return "input " + std::to_string(i) + " received no gradient";
    const std::vector<double> grad = analytic.to_vector<double>();
    VariableList perturbed = leaves;
    const Tensor x = leaves[i].data().clone();
    perturbed[i] = Variable(x);
    double* values = x.data<double>();
    for (size_t j = 0; j < grad.size(); ++j) {
      const double saved = values[j];
      values[j] = saved + options.eps;
      const double plus = loss(perturbed);
      values[j] = saved - options.eps;
      const double minus = loss(perturbed);
      values[j] = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      if (!(std::fabs(grad[j] - numeric) <= options.atol + options.rtol * std::fabs(numeric))) {
        std::ostringstream out;
        out << "input " << i << " element " << j << ": analytic " << grad[j] << " vs numeric " << numeric;
        return out.str();
      }
    }
  }
  return "";
}

}  // namespace fathom::autograd
