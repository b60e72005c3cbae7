#pragma once
// y = x Wᵀ + b with W and b whole on every rank of the tensor-parallel group, inside the
// tensor-parallel region: the input enters as a column-parallel layer's does (copy_to_tensor_region,
// or the sequence all-gather under sequence parallelism), and W's and b's gradients are summed
// over the group. Each rank then uses only its part of the output — grouped-query attention's
// key/value heads when there are fewer of them than ranks, which Megatron replicates — so each
// rank's gradient is one part of the whole one, and their sum is it. The parameters carry no
// placement: checkpoints, exports and load_full take them as any replicated parameter.

#include <memory>

#include "nn/module.h"
#include "parallel/communicator.h"
#include "parallel/tensor_parallel_regions.h"

namespace fathom::parallel {

class ReplicatedLinear : public nn::Module {
 public:
  // Initialised as nn::Linear(in_features, out_features) would be.
  ReplicatedLinear(int64_t in_features, int64_t out_features, std::shared_ptr<Communicator> group, bool bias = true,
                   DType dtype = DType::F32, bool sequence_parallel = false);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "ReplicatedLinear"; }

  Variable weight;  // [out_features, in_features]
  Variable bias;    // [out_features]; undefined without bias
  const int64_t in_features, out_features;
  const bool sequence_parallel;

 private:
  std::shared_ptr<Communicator> group_;
};

}  // namespace fathom::parallel
