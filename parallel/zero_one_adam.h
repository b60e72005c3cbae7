#pragma once
// 0/1 Adam (Lu et al. 2022), as DeepSpeed implements it (deepspeed/runtime/fp16/onebit/zoadam.py):
//
//   step 1:      DeepSpeed's initialisation step: nothing moves.
//   before var_freeze_step, on variance-update steps (every var_interval steps; the interval
//                starts at 1 and doubles after every var_update_scaler updates): the engine
//                averages the gradient at full precision and m, v update as Adam's;
//                on the other steps the engine does not average: each rank's gradient goes
//                through the 1-bit compressed all-reduce and only m updates.
//   after var_freeze_step: v is frozen; each rank takes local steps on its own gradient from the
//                weights all ranks share ("weights_at_sync"), and every local_step_interval steps
//                (1, doubling every local_step_scaler steps up to local_step_clipper) the ranks
//                all-reduce compressed what their local steps moved them, in momentum units
//                (DeepSpeed's momentum accumulator), and apply the mean to the shared weights.
//   every step:  update = m / (√v + eps) + weight_decay·p (no bias correction); p -= lr·update.
//
// The error buffers (per parameter) serve the gradients and, zeroed once at the freeze, the
// synchronisations. DeepSpeed keeps the accumulated -Σ lr·update and undoes each rank's local
// steps by subtracting it, which leaves the ranks' weights a rounding apart after every
// synchronisation; keeping the shared weights instead (the same 4 bytes per parameter) makes every
// rank hold the same weights, bit for bit, after each. The schedule's counters follow from the
// step count; the lr summed since the last synchronisation and the error buffers are rank-local
// state that checkpoints keep.

#include <array>
#include <memory>

#include "parallel/compressed_optimizer.h"

namespace fathom::parallel {

struct ZeroOneAdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t var_freeze_step = 100000;  // DeepSpeed's defaults
  int64_t var_update_scaler = 16;
  int64_t local_step_scaler = 32678;
  int64_t local_step_clipper = 16;
};

class ZeroOneAdam final : public CompressedOptimizer {
 public:
  ZeroOneAdam(std::vector<nn::ParamGroup> groups, ZeroOneAdamOptions options, std::shared_ptr<Communicator> data_group);

  // True when the coming step updates the variance (the engine then averages its gradients).
  bool wants_reduced_gradients() const override;

  std::vector<Tensor> rank_local_state() const override;  // the lr sums, then the error buffers
  void load_rank_local_state(const std::vector<Tensor>& state) override;

  // The schedule in force after `steps` completed steps (a replay of DeepSpeed's policy).
  struct Schedule {
    int64_t var_interval = 1, var_counter = 0, local_interval = 1, local_counter = 0;
    bool frozen = false;
  };
  Schedule schedule_after(int64_t steps) const;

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "weights_at_sync"}; }
  void update_group(const nn::ParamGroup& group, const std::vector<Update>& updates) override;

 private:
  ZeroOneAdamOptions options_;
  std::vector<double> lrs_;  // per group: lr summed since the last sync
  bool errors_zeroed_at_freeze_ = false;
};

}  // namespace fathom::parallel
