#pragma once
// ReplicatedState: ZeRO stage 0. Every rank holds the whole gradient and optimizer state.
//
//   one process: gradients stay where autograd put them;
//   data parallel (more than one rank in the data group): the backward that ends a cycle
//     averages gradients in buckets that start while backward runs (parallel::
//     GradientReducer);
//   16-bit model: the optimizer updates fp32 master weights. As each 16-bit gradient becomes
//     final it is folded into its master's fp32 gradient and released, so accumulation over
//     micro-batches loses nothing to 16-bit rounding (DeepSpeed's BF16_Optimizer does the same);
//     the reducer then averages the fp32 gradients. After the step the masters are rounded back
//     into the model once.
// One grad-ready hook per parameter does both, in that order.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/gradient_reducer.h"
#include "zero/flat_optimizer_state.h"
#include "zero/training_state.h"
#include "zero/zero_defaults.h"

namespace fathom::zero {

struct ReplicatedOptions {
  int64_t reduce_bucket_elements = kDefaultReduceBucketElements;  // zero_optimization.reduce_bucket_size
  bool overlap_comm = true;                                       // reduce buckets while backward runs
  parallel::GradientAveraging averaging;  // prescaling, predivision, communication dtype
  // 16-bit models: gradients accumulate across micro-batches in the model's dtype and are folded
  // into the fp32 masters once, in the backward that ends the cycle (data_types.grad_accum_dtype);
  // otherwise every micro-batch's gradient is folded in at once (fp32 accumulation).
  bool accumulate_in_model_dtype = false;
};

class ReplicatedState final : public TrainingState, public FlatStateView {
 public:
  // `make_optimizer` null: no optimizer (evaluation); gradients are still reduced.
  ReplicatedState(const NamedParameters& params, ParallelLayout layout, ReplicatedOptions options,
                  const OptimizerFactory& make_optimizer);

  int stage() const override { return 0; }
  Device device() const override;
  void begin_backward(bool boundary) override;
  void end_backward() override;
  void scale_gradients(double factor) override;
  void set_gradient_reduction(bool on) override { reduce_gradients_ = on; }
  void step() override;
  void zero_grad() override;
  void sum_tied_gradients(parallel::Communicator& tie, const std::vector<size_t>& parameters) override;
  FlatStateView& flat_view() override { return *this; }

  // FlatStateView
  std::vector<FlatSlot> flat_slots() const override { return slots_; }
  DType parameter_dtype() const override;
  std::vector<FlatRange> flat_ranges(Range wanted) const override;
  void load_flat_ranges(const FlatReader& read, const SavedStates& saved) override;
  int64_t optimizer_steps() const override;
  std::vector<std::string> optimizer_state_names() const override;

  // What the optimizer updates: the fp32 masters (16-bit models) or the parameters themselves.
  const NamedParameters& updated() const { return keeps_masters_ ? masters_ : params_; }
  // Null with one data-parallel rank.
  const parallel::GradientReducer* reducer() const { return reducer_.get(); }

 protected:
  bool local_overflow() const override;
  double local_norm() const override;
  bool data_parallel_sharded() const override { return false; }

 private:
  void on_gradient_ready(size_t parameter);
  std::vector<Tensor> gradients() const;  // of updated(), those defined
  Tensor concatenated(const NamedParameters& params, DType dtype) const;
  void scatter(const Tensor& flat, const NamedParameters& params) const;

  NamedParameters params_, masters_;
  std::vector<FlatSlot> slots_;
  OptimizerLayout optimizer_layout_;
  std::unique_ptr<parallel::GradientReducer> reducer_;
  bool reduce_gradients_ = true;
  bool accumulate_in_model_dtype_ = false;
  bool boundary_ = false;  // the backward running ends an accumulation cycle
  std::vector<autograd::HookHandle> hooks_;
};

}  // namespace fathom::zero
