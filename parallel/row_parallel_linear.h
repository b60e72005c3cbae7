#pragma once
// y = x Wᵀ + b with W's columns (the input features) split over the tensor-parallel group: rank r
// holds columns shard_range(in_features, tp, r) of W. The input is already split the same way
// (a ColumnParallelLinear's output), or, with input_is_parallel = false, is replicated and this
// layer takes its slice. The partial products are summed over the group
// (reduce_from_tensor_region) and the bias, replicated, is added once after the sum. Megatron's
// RowParallelLinear.
//
// sequence_parallel: the input is (B, T, local features) and the partial products are
// reduce-scattered along the sequence (reduce_scatter_to_sequence_region), so the output is this
// rank's part of the sequence, (B, T / tp, out); the bias is added to that part, and its gradient,
// a part of the whole, is summed over the group (copy_to_tensor_region on the bias).

#include <memory>

#include "nn/module.h"
#include "parallel/communicator.h"
#include "parallel/tensor_parallel_regions.h"

namespace fathom::parallel {

class RowParallelLinear : public nn::Module {
 public:
  // Initialised as nn::Linear(in_features, out_features) would be, then sliced.
  RowParallelLinear(int64_t in_features, int64_t out_features, std::shared_ptr<Communicator> group, bool bias = true,
                    bool input_is_parallel = true, DType dtype = DType::F32, bool sequence_parallel = false);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "RowParallelLinear"; }
  // Takes this rank's columns of the unsharded weight [out, in], and the whole bias [out].
  void load_full(const Tensor& weight, const Tensor& bias = Tensor());

  Variable weight;  // [out_features, local_in_features]
  Variable bias;    // [out_features], the same on every rank; undefined without bias
  const int64_t in_features, out_features;
  const ShardRange local;  // this rank's input features
  const bool input_is_parallel, sequence_parallel;

 private:
  std::shared_ptr<Communicator> group_;
};

}  // namespace fathom::parallel
