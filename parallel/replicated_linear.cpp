#include "parallel/replicated_linear.h"

#include "autograd/functions.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "parallel/tensor_parallel_init.h"

namespace fathom::parallel {

ReplicatedLinear::ReplicatedLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool with_bias,
                                   DType dtype, bool sequence)
    : in_features(in), out_features(out), sequence_parallel(sequence), group_(std::move(group)) {
  FATHOM_CHECK(group_ != nullptr, "ReplicatedLinear: no tensor-parallel group");
  FATHOM_CHECK(in > 0 && out > 0, "ReplicatedLinear: feature counts must be positive, got ", in, " -> ", out);
  MemoryTagScope tag(MemoryTag::Parameters);
  weight = register_parameter("weight", draw_full_linear_weight(in, out, dtype));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}, dtype));
}

Variable ReplicatedLinear::forward(const Variable& x) {
  FATHOM_CHECK(x.dim() == 3 && x.size(-1) == in_features, "ReplicatedLinear: expected (B, T, ", in_features,
               "), got ", shape_str(x.sizes()));
  const Variable input = sequence_parallel ? gather_from_sequence_region(x, group_, x.size(1) * group_->size())
                                           : copy_to_tensor_region(x, group_);
  // Identity forward, the gradient summed over the group backward.
  const Variable w = copy_to_tensor_region(weight, group_);
  const Variable rows = autograd::reshape(input, {-1, in_features});
  Variable y = autograd::matmul(rows, w, false, /*transpose_b=*/true);
  if (bias.defined()) y = autograd::add(y, copy_to_tensor_region(bias, group_));
  return autograd::reshape(y, {input.size(0), input.size(1), out_features});
}

}  // namespace fathom::parallel
