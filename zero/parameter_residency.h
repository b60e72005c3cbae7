#pragma once
// ParameterResidency: where a training state does not keep every parameter whole in the model
// (ZeRO stage 3 stores a shard per rank), code that reads parameters outside the model's own
// forward and backward — saving the whole model, generating text — has them gathered first and
// released after. A state hands one out (TrainingState::residency()) only then: null means the
// parameters are always whole, and there is nothing to gather.

namespace fathom::nn {
class Module;  // nn/module.h
}  // namespace fathom::nn

namespace fathom::zero {

class ParameterResidency {
 public:
  virtual ~ParameterResidency() = default;

  // Every parameter whole in the model, and released again (collective over the data group).
  virtual void gather_full_parameters() = 0;
  virtual void release_full_parameters() = 0;
  // The parameters of `part` (a module of the model) whole, and released again: for code that
  // reads them one part at a time (the hybrid engine's generation without pin_parameters).
  virtual void gather_parameters_of(const nn::Module& part) = 0;
  virtual void release_parameters_of(const nn::Module& part) = 0;
  // Whether gather_parameters_of is a collective over several ranks: then every rank must call it
  // the same number of times.
  virtual bool gathers_collectively() const = 0;
  // After the stored parameters were overwritten (an optimizer step, a checkpoint load): those
  // kept whole take the new values.
  virtual void reload_parameters() = 0;
};

}  // namespace fathom::zero
