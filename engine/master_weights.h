#pragma once
// fp32 master weights for a model trained in bf16 or fp16 (DeepSpeed's mixed precision).
//
// The model's parameters and activations are 16-bit; the optimizer updates an fp32 copy of
// every parameter (the masters) from the model's gradients converted to fp32 and unscaled, and
// the updated masters are rounded back into the model once per step. Small updates therefore
// accumulate in fp32 instead of vanishing below 16-bit resolution.

#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace fathom {

class MasterWeights {
 public:
  using Named = std::vector<std::pair<std::string, autograd::Variable>>;
  // `model_params`: the model's (16-bit) named parameters. Masters are f32 copies, charged to
  // MemoryTag::OptimizerState (DeepSpeed counts them with the optimizer's 12 bytes/param).
  explicit MasterWeights(const Named& model_params);

  const Named& masters() const { return masters_; }
  // True when some model gradient holds Inf or NaN (an fp16 overflow).
  bool model_gradients_overflow() const;
  // master.grad = fp32(model.grad) * inv_scale for every parameter with a gradient.
  void unscale_gradients_into_masters(double inv_scale);
  // model.data = round(master.data): after the optimizer step.
  void copy_masters_to_model();
  void zero_grad();

 private:
  Named model_;
  Named masters_;
};

}  // namespace fathom
