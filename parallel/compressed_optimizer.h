#pragma once
// What the communication-compressed optimizers (1-bit Adam, 0/1 Adam, 1-bit LAMB) share: the
// data-parallel group they communicate over, their step count, DeepSpeed's exp_avg_mask, and the
// per-parameter error-feedback buffers of 1-bit Adam and 0/1 Adam (rank-local state).

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "nn/optimizer.h"
#include "parallel/compressed_allreduce.h"

namespace fathom::parallel {

class CompressedOptimizer : public nn::Optimizer {
 public:
  // Compressed exchanges this process took part in (none with one rank: nothing to exchange).
  int64_t compressed_steps() const { return compressed_steps_; }

  // DeepSpeed's exp_avg_mask: after every compressed exchange, `param`'s result (its momentum,
  // or for 0/1 Adam the exchanged gradient or accumulator) is multiplied by `mask` (f32,
  // broadcastable to the parameter, 1 to keep, 0 to hold at zero). 1-bit compression cannot send
  // an exact zero — sign(0) is +1 — so entries whose gradient is always zero (BERT's position
  // embeddings past the trained sequence length) would otherwise drift on the error feedback. As
  // in DeepSpeed it belongs to the training script: checkpoints do not keep it.
  void set_exp_avg_mask(const autograd::Variable& param, const Tensor& mask);

 protected:
  // Checks what every one of them takes besides lr and weight_decay (the base's): eps and betas.
  CompressedOptimizer(std::string type, std::vector<nn::ParamGroup> groups, double lr, double weight_decay,
                      double eps, const std::array<double, 2>& betas, std::shared_ptr<Communicator> data_group);

  // They update whole groups (update_group): their momenta travel in one exchange.
  void update(const nn::ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) final;

  Communicator& data_group() const { return *group_; }
  int64_t steps_taken() const;  // by the first parameter (they all step together)
  void count_compressed_step() { ++compressed_steps_; }
  // `values` (param's exchanged result) times param's mask, when it has one.
  void apply_mask(const Tensor& param, const Tensor& values) const;

  // Adam without bias correction, weight decay decoupled, on gradients the engine averaged (the
  // warm-up rule of DeepSpeed's 1-bit Adam and 0/1 Adam): the fused multi-tensor kernel.
  static void adam_step_without_bias_correction(const std::vector<Update>& updates, double lr,
                                                const std::array<double, 2>& betas, double eps, double decay);
  // The updates the three share after the freeze, each one pass over host memory (tensor ops on
  // other devices): m = β1·m + (1-β1)·g, and p -= lr·(m/(√v + eps) + decay·p) with v frozen.
  static void fold_into_momentum(const Tensor& momentum, const Tensor& grad, double beta1);
  static void frozen_variance_step(const Tensor& param, const Tensor& momentum, const Tensor& variance, double lr,
                                   double eps, double decay);
  // Threads for a host loop over n elements (small tensors stay serial); the loops are
  // elementwise, so their results do not depend on it.
  static int host_threads(int64_t n);

  // 1-bit Adam's and 0/1 Adam's exchange: `tensors[i]` (one per update of group `g`) replaced by
  // its compressed mean, each with its own scale and its parameter's error buffers, all in one
  // exchange; then masked. Nothing with one rank.
  void compress_each(size_t g, const std::vector<Update>& updates, const std::vector<Tensor>& tensors);
  // Those error buffers as rank-local state (worker, server per parameter of each group that has
  // compressed, in order), and back (from `state[first]` on).
  std::vector<Tensor> per_parameter_errors() const;
  void load_per_parameter_errors(const std::vector<Tensor>& state, size_t first);
  void zero_per_parameter_errors();

 private:
  std::shared_ptr<Communicator> group_;
  int64_t compressed_steps_ = 0;
  std::vector<std::pair<autograd::Variable, Tensor>> masks_;
  std::vector<std::vector<CompressionErrors>> errors_;  // [group][parameter]; empty until it compresses
};

}  // namespace fathom::parallel
