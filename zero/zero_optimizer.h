#pragma once
// ZeRO stages 1, 2 and 3 (DeepSpeed's DeepSpeedZeroOptimizer and stage 3), from small pieces: FlatParameters
// (the parameters as views of one padded buffer), Partition (each rank's shard) and an
// ordinary optimizer over this rank's shard.
//
// Stages 1 and 2 keep full parameters on every rank; all stages give each rank the fp32 master weights
// (16-bit models) and optimizer states of its shard only. After the optimizer step the updated
// shards are all-gathered into the parameters (in allgather_bucket_size pieces).
//   stage 1: gradients are full, accumulating in a flat buffer across micro-steps; the
//            backward that ends a cycle reduce-scatters them, so each rank gets its shard.
//   stage 2: gradients are sharded too: every micro-step, as gradients become ready (grad-ready
//            hooks), they are copied into reduce_bucket_size buckets that are reduce-scattered
//            while backward runs (overlap_comm) and accumulated into the rank's gradient shard;
//            a parameter's full gradient is released once copied, and at most two buckets exist.
//   stage 3: as stage 2, and parameters are sharded too: a rank stores only its shard, and a
//            ParameterGatherer gathers each module's parameters around its forward and its
//            backward; after the step nothing is all-gathered.
// In mixed precision without gradient accumulation the persistent gradients are 16-bit (the
// ZeRO paper's 2 bytes/param); their reductions accumulate in f32 (parallel/communicator.h) and
// the optimizer sees fp32. With accumulation over micro-steps (accumulate_in_fp32) they are
// fp32, as DeepSpeed's bf16 optimizer keeps them, so that summing micro-batches does not round
// in 16 bits — at stage 0 Fathom always accumulates in fp32.
// Overflow (fp16) is agreed by all ranks; the gradient norm for clipping is global.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/optimizer.h"
#include "parallel/communicator.h"
#include "zero/flat_parameters.h"
#include "zero/parameter_gatherer.h"

namespace fathom::zero {

struct ZeroOptions {
  int stage = 1;
  int64_t reduce_bucket_elements = 500'000'000;     // zero_optimization.reduce_bucket_size
  int64_t allgather_bucket_elements = 500'000'000;  // zero_optimization.allgather_bucket_size
  bool overlap_comm = false;                        // stage 2: reduce buckets while backward runs
  bool accumulate_in_fp32 = false;                  // 16-bit models: fp32 gradients across micro-steps
  GatherOptions gather;                             // stage 3: persistence, prefetch, live cap
};

// Builds the inner optimizer over the named shard variables.
using OptimizerFactory =
    std::function<std::shared_ptr<nn::Optimizer>(const std::vector<std::pair<std::string, autograd::Variable>>&)>;

class ZeroOptimizer {
 public:
  // `model` (stage 3): whose modules get the hooks that gather their parameters on demand.
  ZeroOptimizer(const FlatParameters::Named& params, std::shared_ptr<distributed::Communicator> group,
                ZeroOptions options, const OptimizerFactory& make_optimizer, nn::Module* model = nullptr);
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  int stage() const { return options_.stage; }
  const std::shared_ptr<nn::Optimizer>& optimizer() const { return optimizer_; }
  const FlatParameters& flat_parameters() const { return flat_; }
  distributed::Communicator& group() const { return *group_; }

  // Around each micro-batch's backward (the engine calls them): `boundary` when it ends a cycle.
  void prepare_backward(bool boundary);
  void finish_backward();

  // At the boundary, on this rank's fp32 gradient shard:
  bool gradients_overflow() const;          // Inf/NaN on any rank (all ranks agree)
  void unscale_gradients(double inv_scale);
  double gradient_norm() const;             // the global L2 norm over every rank's shard
  void scale_gradients(double factor);      // clipping
  void step();                              // optimizer step, then all-gather the parameters
  void zero_grad();

  // After the stored parameters were overwritten (a checkpoint load): stage 3 re-gathers its
  // persistent parameters. No-op below stage 3.
  void reload_parameters() {
    if (gatherer_) gatherer_->refresh_persistent();
  }
  // Stage 3: every parameter whole (e.g. to save the model), and back to shards. No-ops below.
  void gather_full_parameters();
  void release_full_parameters();
  // The optimizer's variable: this rank's fp32 master shard (f32 models: a view of the
  // parameters' shard), over flat_parameters().partition().owned(rank).
  const autograd::Variable& master() const { return master_; }
  // Stage 3's gatherer (null below stage 3).
  const ParameterGatherer* gatherer() const { return gatherer_.get(); }

 private:
  struct Bucket {
    Range range;                  // in the flat buffer
    std::vector<size_t> slots;
    size_t ready = 0;
    Tensor flat, received;        // alive only while the bucket is in use
    distributed::WorkHandle work;
  };
  void build_buckets();
  void on_gradient_ready(size_t slot);
  void fold_into_flat_gradients(size_t slot);  // stage 1, fp32 accumulation of 16-bit gradients
  void launch_ready_buckets();
  void complete(size_t bucket);
  void gradients_to_master();
  void all_gather_parameters();
  void reduce_scatter_flat_gradients();

  FlatParameters flat_;
  std::shared_ptr<distributed::Communicator> group_;
  ZeroOptions options_;
  bool mixed_ = false;        // 16-bit parameters: an fp32 master shard
  DType gradient_dtype_;      // of the persistent gradients: the model's, or f32 (accumulate_in_fp32)
  Range owned_;               // this rank's real elements, in buffer coordinates
  Tensor flat_gradients_;     // stage 1: padded, gradient_dtype_
  Tensor gradient_shard_;     // stages 2-3: [owned], gradient_dtype_
  autograd::Variable master_; // fp32: f32 models update their own shard in place
  std::shared_ptr<nn::Optimizer> optimizer_;
  std::unique_ptr<ParameterGatherer> gatherer_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_slot_;
  std::vector<bool> slot_copied_;
  size_t next_launch_ = 0, next_complete_ = 0;
  bool boundary_ = false, in_backward_ = false;
};

}  // namespace fathom::zero
