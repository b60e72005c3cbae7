#pragma once
// fp32 master weights for a model trained in bf16 or fp16 (DeepSpeed's mixed precision).
//
// The model's parameters and activations are 16-bit; the optimizer updates an fp32 copy of
// every parameter (the masters), and the updated masters are rounded back into the model once
// per step, so small updates accumulate in fp32 instead of vanishing below 16-bit resolution.
// Gradients accumulate in fp32 too: as each 16-bit gradient becomes final in a backward (a
// grad-ready hook), it is added into its master's fp32 gradient and released, so gradient
// accumulation over micro-batches loses nothing to 16-bit rounding (as DeepSpeed's
// BF16_Optimizer accumulates in fp32).

#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace fathom {

class MasterWeights {
 public:
  using Named = std::vector<std::pair<std::string, autograd::Variable>>;
  // `model_params`: the model's (16-bit) named parameters. Masters are f32 copies, charged to
  // MemoryTag::MasterWeights (DeepSpeed counts them in the optimizer's 12 bytes/param).
  explicit MasterWeights(const Named& model_params);

  const Named& masters() const { return masters_; }
  // True when some accumulated gradient holds Inf or NaN (an fp16 overflow).
  bool gradients_overflow() const;
  // Multiplies the accumulated fp32 gradients by inv_scale (1 / loss scale).
  void unscale_gradients(double inv_scale);
  // model.data = round(master.data): after the optimizer step.
  void copy_masters_to_model();
  void zero_grad();

 private:
  Named model_;
  Named masters_;
};

}  // namespace fathom
