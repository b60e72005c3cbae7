#pragma once
// Losses on Variables.

#include <optional>

#include "autograd/variable.h"

namespace fathom::nn {

// Mean of -log softmax(logits)[target] over targets != ignore_index, or their sum divided by
// `normaliser` when given (the engine passes the loss_normaliser of docs/data.md so a loss with
// ignored tokens equals the global token mean at any data-parallel world size).
autograd::Variable cross_entropy(const autograd::Variable& logits, const Tensor& targets,
                                 std::optional<double> normaliser = std::nullopt, int64_t ignore_index = -100);
// Mean squared error.
autograd::Variable mse_loss(const autograd::Variable& prediction, const autograd::Variable& target);

}  // namespace fathom::nn
