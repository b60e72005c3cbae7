#pragma once
// Where a parameter lives in a model-parallel job: data that the training state, checkpoints
// and exports read, so that no layer has to guess (docs/architecture.md, "Parallel placement").
//
//   replicated (the default): every rank of the tensor-parallel group holds the whole tensor
//     and, once backward has run, the same gradient (a layer norm under tensor parallelism);
//   sharded: this rank holds slice `shard_index` of `num_shards` along `sharded_dim` of the
//     full tensor (a column-parallel weight), each rank a different one; with fused_parts p > 1
//     the dimension is p equal parts (a fused q, k, v projection) and the rank holds that slice
//     of every part, part after part; the dimension may be stored padded (a vocabulary padded to
//     a multiple of 128 × tp): the shards split `stored_size` rows, of which the first
//     `full_size` are the tensor's and the rest zero padding that no checkpoint or export holds;
//   pipeline_stage: the pipeline stage that owns it;
//   tie: the name of a group of parameters that are one parameter in the unsplit model (GPT's
//     embedding and LM head on the first and last pipeline stages); exactly one member of a tie
//     is its `tie_leader`, the copy that norms count and checkpoints save.
//
// shard_of / place_shard move between a full tensor and any rank's shard by this description
// alone, so a checkpoint written at one tensor-parallel size is read at any other.

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fathom::nn {

// Which part of a dimension of `size` rank `rank` of `parts` holds: size / parts elements, one
// more on the first size % parts ranks.
struct ShardRange {
  int64_t offset = 0, length = 0;
};
ShardRange shard_range(int64_t size, int parts, int rank);

struct Placement {
  int sharded_dim = -1;  // -1: replicated over the tensor-parallel group
  int num_shards = 1;
  int shard_index = 0;
  int fused_parts = 1;
  int64_t full_size = 0;    // the sharded dimension in the unsplit tensor
  int64_t stored_size = 0;  // the same, padding included (>= full_size)
  int pipeline_stage = 0;
  std::string tie;
  bool tie_leader = true;

  bool sharded() const { return sharded_dim >= 0; }
  // Whether this rank's copy counts towards a job-wide sum over parameters (the gradient norm):
  // a shard always does; a replicated tensor only on tensor-parallel rank 0; a tie only at its
  // leader.
  bool counted_at(int tensor_rank) const { return tie_leader && (sharded() || tensor_rank == 0); }
  // Shard `index` of `num_shards` along `dim` of `full_size` (stored as `stored_size`, 0: no
  // padding), in `fused_parts` equal parts.
  static Placement shard(int dim, int num_shards, int shard_index, int64_t full_size, int64_t stored_size = 0,
                         int fused_parts = 1);
  // The same placement as another rank of the group holds it.
  Placement of_rank(int index) const;
};

// One contiguous run of a shard along the sharded dimension: the shard's [local, local + length)
// is the full tensor's [full, full + length).
struct ShardRun {
  int64_t local = 0, full = 0, length = 0;
};
// The shard's runs (one per fused part; padding rows belong to none), and its size along the
// sharded dimension, padding included.
std::vector<ShardRun> shard_runs(const Placement& placement);
int64_t shard_extent(const Placement& placement);

// The unsplit tensor's shape from a shard's (and back); replicated: the same shape.
Shape full_shape(const Shape& shard_shape, const Placement& placement);
Shape shard_shape(const Shape& full_shape, const Placement& placement);
// The shard `placement` describes, cut from the full tensor (padding zero), and its inverse:
// the shard's runs written into `full`.
Tensor shard_of(const Tensor& full, const Placement& placement);
void place_shard(const Tensor& shard, const Placement& placement, const Tensor& full);

}  // namespace fathom::nn
