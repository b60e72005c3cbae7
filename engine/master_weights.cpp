#include "engine/master_weights.h"

#include "autograd/grad_mode.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"

namespace fathom {

MasterWeights::MasterWeights(const Named& model_params) : model_(model_params) {
  MemoryTagScope tag(MemoryTag::OptimizerState);
  for (const auto& [name, param] : model_params) {
    FATHOM_CHECK(is_floating_point(param.dtype()), "mixed precision: parameter \"", name, "\" is ",
                 dtype_name(param.dtype()), ", not a floating-point tensor");
    masters_.emplace_back(name, autograd::Variable(param.data().to(DType::F32).contiguous().clone(), true, name));
  }
}

bool MasterWeights::model_gradients_overflow() const {
  std::vector<Tensor> grads;
  for (const auto& [name, param] : model_)
    if (param.grad().defined()) grads.push_back(param.grad());
  return has_inf_or_nan(grads);
}

void MasterWeights::unscale_gradients_into_masters(double inv_scale) {
  MemoryTagScope tag(MemoryTag::Gradients);
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor& grad = model_[i].second.grad();
    const autograd::Variable& master = masters_[i].second;
    if (!grad.defined()) {
      master.zero_grad();
      continue;
    }
    Tensor f32 = grad.to(DType::F32).contiguous();
    if (f32.shares_storage(grad)) f32 = f32.clone();  // an f32 model gradient: do not scale it in place
    if (inv_scale != 1.0) mul_(f32, inv_scale);
    master.set_grad(f32);
  }
}

void MasterWeights::copy_masters_to_model() {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < model_.size(); ++i) model_[i].second.data().copy_(masters_[i].second.data());
}

void MasterWeights::zero_grad() {
  for (auto& [name, param] : model_) param.zero_grad();
  for (auto& [name, master] : masters_) master.zero_grad();
}

}  // namespace fathom
