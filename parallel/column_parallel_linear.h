#pragma once
// y = x Wᵀ + b with W's rows (the output features) split over the tensor-parallel group: rank r
// holds rows shard_range(out_features, tp, r) of W and b (uneven when tp does not divide
// out_features). The input is replicated over the group (copy_to_tensor_region: its gradient is
// summed over the ranks); the output is this rank's slice of the features, or, with
// gather_output, all of them. Megatron's ColumnParallelLinear.

#include <memory>

#include "nn/module.h"
#include "parallel/communicator.h"
#include "parallel/tensor_parallel_regions.h"

namespace fathom::parallel {

class ColumnParallelLinear : public nn::Module {
 public:
  // Initialised as nn::Linear(in_features, out_features) would be, then sliced: the same seed
  // gives the same model at every tensor-parallel size.
  ColumnParallelLinear(int64_t in_features, int64_t out_features, std::shared_ptr<Communicator> group, bool bias = true,
                       bool gather_output = false, DType dtype = DType::F32);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "ColumnParallelLinear"; }
  // Takes this rank's rows of the unsharded weight [out, in] and bias [out].
  void load_full(const Tensor& weight, const Tensor& bias = Tensor());

  Variable weight;  // [local_out_features, in_features]
  Variable bias;    // [local_out_features]; undefined without bias
  const int64_t in_features, out_features;
  const ShardRange local;  // this rank's output features
  const bool gather_output;

 private:
  std::shared_ptr<Communicator> group_;
};

}  // namespace fathom::parallel
