#pragma once
// 1-bit Adam (Tang et al. 2021), as DeepSpeed implements it (deepspeed/runtime/fp16/onebit/adam.py):
//
//   step 1:                 m, v updated from the averaged gradient; the weights are not (DeepSpeed's
//                           initialisation step)
//   steps 2 .. freeze_step: warm-up, every gradient averaged at full precision by the engine:
//                           m = β1·m + (1-β1)·g,  v = β2·v + (1-β2)·g²
//   after freeze_step:      v frozen; the engine no longer averages gradients; each rank folds its
//                           local gradient into m, and m is replaced by its 1-bit compressed mean
//                           over the data-parallel ranks (parallel/compressed_allreduce.h)
//   every updating step:    update = m / (√v + eps) + weight_decay·p  (no bias correction,
//                           decoupled decay);  p -= lr·update
//
// Each parameter's momentum is compressed with its own scale and error buffers (as DeepSpeed's
// 1-bit Adam does for fp32 parameters; its fp16 engine hands it one flat group), and a group's
// parameters share one exchange. State: "exp_avg" and
// "exp_avg_sq" per parameter, checkpointed like Adam's; the error buffers are this rank's and are
// kept across a checkpoint at the same world size (rank_local_state), where DeepSpeed resets them.

#include <array>
#include <memory>
#include <string>

#include "parallel/compressed_optimizer.h"

namespace fathom::parallel {

struct OneBitAdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t freeze_step = 100000;  // DeepSpeed's default
};

class OneBitAdam final : public CompressedOptimizer {
 public:
  // `data_group`: the ranks that average (the engine's data-parallel group).
  OneBitAdam(std::vector<nn::ParamGroup> groups, OneBitAdamOptions options, std::shared_ptr<Communicator> data_group);

  const OneBitAdamOptions& options() const { return options_; }
  // From the steps taken (so a resumed run knows too): steps after max(freeze_step, 1) compress.
  bool compressing() const;
  bool wants_reduced_gradients() const override { return !compressing(); }

  // The error-feedback buffers (per parameter: worker, then server), kept by checkpoints.
  std::vector<Tensor> rank_local_state() const override { return per_parameter_errors(); }
  void load_rank_local_state(const std::vector<Tensor>& state) override { load_per_parameter_errors(state, 0); }

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  void update_group(const nn::ParamGroup& group, const std::vector<Update>& updates) override;

 private:
  void apply(const nn::ParamGroup& group, const std::vector<Update>& updates, bool update_weights, bool compressed);
  OneBitAdamOptions options_;
};

}  // namespace fathom::parallel
