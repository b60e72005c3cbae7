#pragma once
// Optimizer: the base of SGD, Adam/AdamW, Lamb and Lion (DeepSpeed's config names and semantics).
//
// Parameters come in groups, as in torch.optim: each group has its own lr (LR schedules set it)
// and weight_decay; every other hyperparameter belongs to the optimizer. Per-parameter state
// (step counter and state tensors such as exp_avg) is created on the parameter's first step, in
// f32, charged to MemoryTag::OptimizerState, and keyed by the parameter's dotted name — the
// identity a parameter has in checkpoints and ZeRO partitions.
//
// Parameters must be f32 (their own master copy): mixed-precision master weights come later.

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace fathom::nn {

struct ParamGroup {
  std::vector<autograd::Variable> params;
  // Optional state-dict keys, one per parameter: the dotted names of Module::named_parameters().
  // Without them a parameter is keyed by its Variable name, or — when some Variable is unnamed or
  // two share a name (every Linear's "weight") — by its position, "group<g>.<i>".
  std::vector<std::string> names;
  std::optional<double> lr;            // unset: the optimizer's lr
  std::optional<double> weight_decay;  // unset: the optimizer's weight_decay
};

// What state_dict() returns and load_state_dict() takes. Names:
//   "<param>.step"                  scalar: steps this parameter has taken (absent before its first)
//   "<param>.<state>"               tensor: e.g. "h.0.attn.c_attn.weight.exp_avg"
//   "<param>.<scalar>"              scalar state, for optimizers that keep some (scalar_states())
//   "param_groups.<g>.lr"           scalar, and "param_groups.<g>.weight_decay"
// <param> is the parameter's key (see ParamGroup::names).
struct OptimizerStateDict {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<std::pair<std::string, double>> scalars;

  const Tensor* find_tensor(const std::string& name) const;  // nullptr when absent
  const double* find_scalar(const std::string& name) const;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // "SGD", "Adam", "AdamW", "Lamb", "Lion": used in every error message.
  const std::string& type() const { return type_; }

  // One update of every parameter that has a gradient; parameters whose grad is undefined are
  // skipped and their step counters stay put (as in torch.optim).
  void step();
  void zero_grad(bool set_to_none = true);

  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  double lr(size_t group = 0) const;
  void set_lr(double lr);                // every group
  void set_lr(size_t group, double lr);  // one group
  double weight_decay(size_t group = 0) const;

  // Whether the gradients this optimizer steps on must be averaged over the data-parallel ranks
  // first (the training state's reduction). False for an optimizer that communicates itself
  // instead (1-bit Adam after its warm-up: parallel/onebit_adam.h); asked before each backward.
  virtual bool wants_reduced_gradients() const { return true; }
  // State that belongs to this rank at this world size only (1-bit Adam's error-feedback
  // buffers): checkpoints keep it per rank and give it back only at the same world size.
  virtual std::vector<Tensor> rank_local_state() const { return {}; }
  virtual void load_rank_local_state(const std::vector<Tensor>& /*state*/) {}

  // After each update of `param`, `copy` holds its new values rounded once to copy's dtype (bf16,
  // f16 or f32; the param's element count and device, contiguous): the 16-bit model a master
  // weight feeds. Adam and SGD write it in their update's own pass (fused_copies()); the others
  // convert after the update. An undefined `copy` removes it.
  void set_copy(const autograd::Variable& param, Tensor copy);
  virtual bool fused_copies() const { return false; }

  // The names of its per-element state tensors ("exp_avg", "exp_avg_sq"; none for plain SGD),
  // known before the first step: what an offloaded step must keep for each parameter.
  std::vector<std::string> element_state_names() const { return state_names(); }

  OptimizerStateDict state_dict() const;
  // Copies the state in (never aliases the given tensors). Everything is checked before anything
  // changes: a missing, mis-shaped or unexpected entry is an error naming it.
  void load_state_dict(const OptimizerStateDict& dict);

  // One parameter's state, adopted as given (`buffers` in element_state_names() order, each of
  // the parameter's shape, f32): loading a state larger than memory a part at a time (ZeRO's
  // sub-groups in swap files), which load_state_dict's whole dict cannot. Optimizers with scalar
  // state need load_state_dict.
  void load_param_state(const autograd::Variable& param, int64_t step, std::vector<Tensor> buffers);

  // The per-parameter scalar state alone ("<param>.<scalar>" of every parameter that has
  // stepped): what a checkpoint keeps beside the state tensors. Empty for most optimizers.
  std::vector<std::pair<std::string, double>> scalar_state_dict() const;

  // Inspection: the key a parameter has in the state dict, its step count (0 before its first
  // step), one state tensor (undefined before its first step) and one scalar state.
  std::string param_key(const autograd::Variable& param) const;
  int64_t step_count(const autograd::Variable& param) const;
  Tensor state(const autograd::Variable& param, const std::string& name) const;
  double scalar_state(const autograd::Variable& param, const std::string& name) const;

 protected:
  struct ParamState {
    int64_t step = 0;
    Tensor copy;                  // set_copy's: rewritten after every update (undefined: none)
    std::vector<Tensor> buffers;  // in the order of state_names(); empty before the first step
    std::vector<double> scalars;  // in the order of scalar_states(); empty before the first step
  };

  Optimizer(std::string type, std::vector<ParamGroup> groups, double default_lr, double default_weight_decay);

  // Names of the per-parameter state tensors, in the order of ParamState::buffers.
  virtual std::vector<std::string> state_names() const = 0;
  // Per-parameter scalars (1-bit LAMB's frozen trust ratio), in the order of ParamState::scalars,
  // with the value each starts from at the parameter's first step.
  struct ScalarState {
    std::string name;
    double initial;
  };
  virtual std::vector<ScalarState> scalar_states() const { return {}; }
  // Updates one parameter. `param` and `grad` are contiguous f32 of one shape; state.step
  // already counts this step (from 1) and state.buffers exist (zeros on the first step).
  virtual void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) = 0;
  // Every parameter of `group` that has a gradient this step, in order, each as update() gets it.
  struct Update {
    Tensor param, grad;
    ParamState* state;
    const Tensor& copy() const { return state->copy; }  // undefined, or to write in the same pass
  };
  // Updates them: update() for each by default. Optimizers whose update is elementwise (Adam,
  // SGD) override it to update the whole list in one multi-tensor kernel, one launch on CUDA
  // instead of one per parameter.
  virtual void update_group(const ParamGroup& group, const std::vector<Update>& updates);
  // `updates` split by (device, key(update)), in order of first appearance: the sets one
  // multi-tensor kernel can take.
  using UpdateBatch = std::pair<std::pair<Device, int64_t>, std::vector<const Update*>>;
  static std::vector<UpdateBatch> batch_updates(const std::vector<Update>& updates,
                                                const std::function<int64_t(const Update&)>& key);
  // Hook before the first parameter of each step (e.g. Lamb forgets last step's coefficients).
  virtual void begin_step() {}
  // Hook after the last group of each step: for an update that needs every group at once (1-bit
  // LAMB compresses all momenta as one buffer).
  virtual void end_step() {}

 private:
  struct Slot {
    size_t group;
    size_t index;
  };
  Slot find(const autograd::Variable& param) const;
  void check_param(const autograd::Variable& param, const std::string& key) const;

  std::string type_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<std::string>> keys_;   // [group][index]
  std::vector<std::vector<ParamState>> states_;  // [group][index]
};

// Hyperparameter checks shared by the optimizers: messages name the DeepSpeed config key and
// the allowed range, e.g. `Adam: "lr" must be >= 0, got -0.1`.
void check_non_negative(const std::string& type, const char* key, double value);
void check_betas(const std::string& type, double beta1, double beta2);

// Wraps a parameter list as one group (the common case).
std::vector<ParamGroup> single_group(std::vector<autograd::Variable> params);
// The same with dotted names as keys (Module::named_parameters()).
std::vector<ParamGroup> single_group(const std::vector<std::pair<std::string, autograd::Variable>>& named);

}  // namespace fathom::nn
