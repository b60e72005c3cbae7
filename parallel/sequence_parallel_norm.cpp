#include "parallel/sequence_parallel_norm.h"

#include "autograd/nn_functions.h"
#include "core/error.h"
#include "parallel/tensor_parallel_regions.h"

namespace fathom::parallel {

SequenceParallelLayerNorm::SequenceParallelLayerNorm(int64_t dim, std::shared_ptr<Communicator> group, double eps,
                                                     bool bias, DType dtype)
    : nn::LayerNorm(dim, eps, bias, dtype), group_(std::move(group)) {
  FATHOM_CHECK(group_ != nullptr, "SequenceParallelLayerNorm: no tensor-parallel group");
}

autograd::Variable SequenceParallelLayerNorm::forward(const autograd::Variable& x) {
  const autograd::Variable summed_bias = bias.defined() ? copy_to_tensor_region(bias, group_) : bias;
  return autograd::layernorm(x, copy_to_tensor_region(weight, group_), summed_bias, eps);
}

SequenceParallelRMSNorm::SequenceParallelRMSNorm(int64_t dim, std::shared_ptr<Communicator> group, double eps,
                                                 DType dtype)
    : nn::RMSNorm(dim, eps, dtype), group_(std::move(group)) {
  FATHOM_CHECK(group_ != nullptr, "SequenceParallelRMSNorm: no tensor-parallel group");
}

autograd::Variable SequenceParallelRMSNorm::forward(const autograd::Variable& x) {
  return autograd::rmsnorm(x, copy_to_tensor_region(weight, group_), eps);
}

}  // namespace fathom::parallel
