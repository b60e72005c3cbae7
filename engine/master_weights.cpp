#include "engine/master_weights.h"

#include "autograd/grad_mode.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"

namespace fathom {

MasterWeights::MasterWeights(const Named& model_params) : model_(model_params) {
  MemoryTagScope tag(MemoryTag::MasterWeights);
  for (const auto& [name, param] : model_params) {
    FATHOM_CHECK(is_floating_point(param.dtype()), "mixed precision: parameter \"", name, "\" is ",
                 dtype_name(param.dtype()), ", not a floating-point tensor");
    const autograd::Variable master(param.data().to(DType::F32).contiguous().clone(), true, name);
    masters_.emplace_back(name, master);
    param.add_grad_ready_hook([master](const autograd::Variable& p) {
      MemoryTagScope grads(MemoryTag::Gradients);
      const Tensor f32 = p.grad().to(DType::F32);
      if (Tensor accumulated = master.grad(); accumulated.defined()) add_(accumulated, f32);  // in place
      else master.set_grad(f32.shares_storage(p.grad()) ? f32.clone() : f32.contiguous());
      p.zero_grad();  // the 16-bit gradient is folded in: free it
    });
  }
}

bool MasterWeights::gradients_overflow() const {
  std::vector<Tensor> grads;
  for (const auto& [name, master] : masters_)
    if (master.grad().defined()) grads.push_back(master.grad());
  return has_inf_or_nan(grads);
}

// The per-parameter passes below are one multi-tensor kernel each (one launch on CUDA).
void MasterWeights::unscale_gradients(double inv_scale) {
  if (inv_scale == 1.0) return;
  std::vector<ScaleTensors> grads;
  for (const auto& [name, master] : masters_)
    if (Tensor grad = master.grad(); grad.defined()) grads.push_back({grad, Tensor()});  // contiguous f32 (the hook)
  scale_multi(grads, inv_scale);
}

void MasterWeights::copy_masters_to_model() {
  autograd::NoGradGuard no_grad;
  std::vector<ScaleTensors> pairs;
  for (size_t i = 0; i < model_.size(); ++i) pairs.push_back({masters_[i].second.data(), model_[i].second.data()});
  scale_multi(pairs, 1.0);  // x * 1 is x: a rounding copy
}

void MasterWeights::zero_grad() {
  for (auto& [name, param] : model_) param.zero_grad();
  for (auto& [name, master] : masters_) master.zero_grad();
}

}  // namespace fathom
