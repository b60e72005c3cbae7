#pragma once
// y = x Wᵀ + b with W's rows (the output features) split over the tensor-parallel group: rank r
// holds rows shard_range(out_features, tp, r) of W and b (uneven when tp does not divide
// out_features). The input is replicated over the group (copy_to_tensor_region: its gradient is
// summed over the ranks); the output is this rank's slice of the features, or, with
// gather_output, all of them. Megatron's ColumnParallelLinear.
//
// fused_parts p > 1: the output is p equal parts (a fused q, k, v projection: p = 3), each split
// over the group, so a rank holds the same slice of every part — whole heads of q, k and v alike —
// stored part after part: p × local.length rows (and the output features in that order).
//
// sequence_parallel: the input is this rank's part of the sequence, (B, T / tp, C); the layer
// all-gathers it along the sequence (gather_from_sequence_region: its backward reduce-scatters,
// which is also the input gradient's sum over the group), in place of copy_to_tensor_region.

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
                       bool gather_output = false, DType dtype = DType::F32, int64_t fused_parts = 1,
                       bool sequence_parallel = false);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "ColumnParallelLinear"; }
  // Takes this rank's rows of the unsharded weight [out, in] and bias [out].
  void load_full(const Tensor& weight, const Tensor& bias = Tensor());

  Variable weight;  // [fused_parts × local.length, in_features]
  Variable bias;    // [fused_parts × local.length]; undefined without bias
  const int64_t in_features, out_features, fused_parts;
  const ShardRange local;  // this rank's output features (of each part)
  const bool gather_output, sequence_parallel;
  int64_t local_out_features() const { return fused_parts * local.length; }

 private:
  std::shared_ptr<Communicator> group_;
};

}  // namespace fathom::parallel
