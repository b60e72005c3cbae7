#pragma once
// Where a parameter lives in a model-parallel job: data that the training state, checkpoints
// and exports read, so that no layer has to guess (docs/architecture.md, "Parallel placement").
//
//   replicated (the default): every rank of the tensor-parallel group holds the whole tensor
//     and, once backward has run, the same gradient (a layer norm under tensor parallelism);
//   sharded: this rank holds slice `shard_index` of `num_shards` along `sharded_dim` of the
//     full tensor (a column-parallel weight), each rank a different one; with fused_parts p > 1
//     the dimension is p equal parts (a fused q, k, v projection) and the rank holds that slice
//     of every part, part after part;
//   pipeline_stage: the pipeline stage that owns it;
//   tie: the name of a group of parameters that are one parameter in the unsplit model (GPT's
//     embedding and LM head on the first and last pipeline stages); exactly one member of a tie
//     is its `tie_leader`, the copy that norms count and checkpoints save.

#include <string>

namespace fathom::nn {

struct Placement {
  int sharded_dim = -1;  // -1: replicated over the tensor-parallel group
  int num_shards = 1;
  int shard_index = 0;
  int fused_parts = 1;
  int pipeline_stage = 0;
  std::string tie;
  bool tie_leader = true;

  bool sharded() const { return sharded_dim >= 0; }
  // Whether this rank's copy counts towards a job-wide sum over parameters (the gradient norm):
  // a shard always does; a replicated tensor only on tensor-parallel rank 0; a tie only at its
  // leader.
  bool counted_at(int tensor_rank) const { return tie_leader && (sharded() || tensor_rank == 0); }
  static Placement shard(int dim, int num_shards, int shard_index) {
    Placement p;
    p.sharded_dim = dim;
    p.num_shards = num_shards;
    p.shard_index = shard_index;
    return p;
  }
};

}  // namespace fathom::nn
