#include "nn/loss.h"

#include "autograd/functions.h"
#include "autograd/nn_functions.h"

namespace fathom::nn {

autograd::Variable cross_entropy(const autograd::Variable& logits, const Tensor& targets,
                                 std::optional<double> normaliser, int64_t ignore_index) {
  return autograd::cross_entropy(logits, targets, normaliser, ignore_index);
}

autograd::Variable mse_loss(const autograd::Variable& prediction, const autograd::Variable& target) {
  FATHOM_CHECK(prediction.sizes() == target.sizes(), "mse_loss: prediction shape ", shape_str(prediction.sizes()),
               " and target shape ", shape_str(target.sizes()), " differ");
  const autograd::Variable diff = autograd::sub(prediction, target);
  return autograd::mean(autograd::mul(diff, diff));
}

}  // namespace fathom::nn
