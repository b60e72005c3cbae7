#include "nn/layer_sequence.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "core/cuda/cuda_runtime.h"
#include "core/error.h"

namespace fathom::nn {

autograd::Variable LayerSequence::forward_layers(const autograd::Variable& input, size_t begin, size_t end) {
  end = std::min(end, num_layers());
  FATHOM_CHECK(begin <= end, "forward_layers: layers [", begin, ", ", end, ") of ", num_layers(), " are not a range");
  autograd::Variable x = input;
  for (size_t layer = begin; layer < end; ++layer) x = run_layer(layer, x);
  return x;
}

autograd::Variable LayerSequence::run_layer(size_t layer, const autograd::Variable& input) {
  if (!checkpointing_ || !autograd::is_grad_enabled() || !checkpointing_->recompute(layer))
    return forward_layer(layer, input);
  const CheckpointPolicy& policy = *checkpointing_;
  const LayerFunction run = [this, layer](const autograd::Variable& x) { return forward_layer(layer, x); };
  autograd::Variable output = policy.checkpoint ? policy.checkpoint(run, input) : checkpoint_layer(run, input);
  if (policy.synchronize_boundary && output.device().is_cuda()) cuda::synchronize_device(output.device().index);
  return output;
}

void LayerSequence::set_checkpointing(CheckpointPolicy policy) {
  checkpointing_ = policy.recompute ? std::make_shared<const CheckpointPolicy>(std::move(policy)) : nullptr;
}

}  // namespace fathom::nn
