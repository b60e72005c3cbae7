#pragma once
// The tensor-parallel regions (Megatron's mappings): differentiable ops over the tensor-parallel
// group, from which the tensor-parallel layers are built (parallel/column_parallel_linear.h,
// parallel/row_parallel_linear.h). Layers never call the communicator directly.
//
//   copy_to_tensor_region         forward: identity          backward: all-reduce
//   reduce_from_tensor_region     forward: all-reduce        backward: identity
//   scatter_to_tensor_region      forward: this rank's slice of the last dim
//                                 backward: all-gather along the last dim
//   gather_from_tensor_region     forward: all-gather along the last dim
//                                 backward: this rank's slice
// and, for sequence parallelism, along the sequence dimension (dim 1 of Fathom's [B, T, C]):
//   scatter_to_sequence_region         forward: this rank's slice    backward: all-gather
//   gather_from_sequence_region        forward: all-gather           backward: reduce-scatter
//   reduce_scatter_to_sequence_region  forward: reduce-scatter       backward: all-gather
//
// Slices may be uneven: rank r of tp holds shard_range(n, tp, r) — n / tp elements, one more on
// the first n % tp ranks — so a size that tp does not divide still splits.

#include <memory>

#include "autograd/variable.h"
#include "nn/placement.h"
#include "parallel/communicator.h"

namespace fathom::parallel {

using autograd::Variable;

// Which part of a dimension of `size` rank `rank` of `parts` holds (nn/placement.h).
using nn::ShardRange;
using nn::shard_range;

Variable copy_to_tensor_region(const Variable& x, const std::shared_ptr<Communicator>& group);
Variable reduce_from_tensor_region(const Variable& x, const std::shared_ptr<Communicator>& group);
Variable scatter_to_tensor_region(const Variable& x, const std::shared_ptr<Communicator>& group);
// `full_size`: the gathered last dimension (the pieces' sum; shard_range says each rank's piece).
Variable gather_from_tensor_region(const Variable& x, const std::shared_ptr<Communicator>& group, int64_t full_size);

constexpr int64_t kSequenceDim = 1;
Variable scatter_to_sequence_region(const Variable& x, const std::shared_ptr<Communicator>& group);
Variable gather_from_sequence_region(const Variable& x, const std::shared_ptr<Communicator>& group,
                                     int64_t full_length);
Variable reduce_scatter_to_sequence_region(const Variable& x, const std::shared_ptr<Communicator>& group);

// The plain-tensor collectives beneath them (no autograd): along dimension `dim` (negative counts
// from the end), every rank's piece in rank order, pieces as shard_range gives them.
Tensor gather_along(const Tensor& piece, int64_t dim, int64_t full_size, Communicator& group);
Tensor slice_along(const Tensor& whole, int64_t dim, const Communicator& group);  // this rank's piece
Tensor reduce_scatter_along(const Tensor& whole, int64_t dim, Communicator& group);

}  // namespace fathom::parallel
