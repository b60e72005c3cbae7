#include "parallel/partitioned_checkpoint.h"

#include "parallel/tensor_parallel_regions.h"

namespace fathom::parallel {

nn::CheckpointPolicy partition_checkpoint_inputs(nn::CheckpointPolicy policy, std::shared_ptr<Communicator> group) {
  if (group->size() == 1) return policy;
  // The slice's backward all-gathers and the gather's backward slices, so the gradient passes
  // through unchanged.
  policy.checkpoint = [group](const nn::LayerFunction& layer, const autograd::Variable& x) {
    const int64_t width = x.size(-1);
    const nn::LayerFunction gathered = [layer, group, width](const autograd::Variable& slice) {
      return layer(gather_from_tensor_region(slice, group, width));
    };
    return nn::checkpoint_layer(gathered, scatter_to_tensor_region(x, group));
  };
  return policy;
}

}  // namespace fathom::parallel
