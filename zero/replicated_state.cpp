#include "zero/replicated_state.h"

#include "autograd/grad_mode.h"
#include "core/memory_stats.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/reduction.h"

namespace fathom::zero {

ReplicatedState::ReplicatedState(const NamedParameters& params, ParallelLayout layout, ReplicatedOptions options,
                                 const OptimizerFactory& make_optimizer)
    // fp32 masters only for an optimizer to update: an evaluation state of a 16-bit model has none.
    : TrainingState(std::move(layout),
                    make_optimizer && !params.empty() &&
                        (params.front().second.dtype() == DType::BF16 || params.front().second.dtype() == DType::F16)),
      params_(params),
      slots_(flat_slots_of(params)),
      accumulate_in_model_dtype_(options.accumulate_in_model_dtype) {
  FATHOM_CHECK(layout_.placements.size() == params_.size(), "training state: ", layout_.placements.size(),
               " placements for ", params_.size(), " parameters");
  if (keeps_masters_) {
    MemoryTagScope tag(MemoryTag::MasterWeights);  // DeepSpeed counts them in the optimizer's 12 bytes/param
    for (const auto& [name, param] : params_) {
      FATHOM_CHECK(param.dtype() == params_.front().second.dtype(), "mixed precision: parameter \"", name, "\" is ",
                   dtype_name(param.dtype()), " but \"", params_.front().first, "\" is ",
                   dtype_name(params_.front().second.dtype()), "; the model must be in one 16-bit dtype");
      masters_.emplace_back(name, autograd::Variable(param.data().to(DType::F32).contiguous().clone(), true, name));
    }
  }
  if (make_optimizer) optimizer_ = make_optimizer(updated());
  for (const FlatSlot& slot : slots_) optimizer_layout_.keys.push_back(slot.name);
  optimizer_layout_.slots = slots_;
  optimizer_layout_.covers = {0, slots_.empty() ? 0 : slots_.back().range().end};

  if (data_group().size() > 1) {
    // Gradients are averaged where the optimizer reads them: the fp32 masters in mixed precision.
    std::vector<parallel::ReducedParameter> reduced;
    for (size_t i = 0; i < params_.size(); ++i) reduced.push_back({params_[i].first, updated()[i].second});
    reducer_ = std::make_unique<parallel::GradientReducer>(
        layout_.groups.for_device(parallel::Axis::Data, device()), std::move(reduced),
        parallel::GradientReducerOptions{.bucket_elements = options.reduce_bucket_elements,
                                            .overlap = options.overlap_comm,
                                            .averaging = options.averaging});
  }
  if (keeps_masters_ || reducer_)
    for (size_t i = 0; i < params_.size(); ++i)
      hooks_.push_back(
          params_[i].second.add_grad_ready_hook([this, i](const autograd::Variable&) { on_gradient_ready(i); }));
}

Device ReplicatedState::device() const { return params_.empty() ? kCPU : params_.front().second.device(); }

DType ReplicatedState::parameter_dtype() const { return params_.empty() ? DType::F32 : params_.front().second.dtype(); }

void ReplicatedState::on_gradient_ready(size_t i) {
  if (keeps_masters_ && (boundary_ || !accumulate_in_model_dtype_)) {
    const autograd::Variable& param = params_[i].second;
    const autograd::Variable& master = masters_[i].second;
    MemoryTagScope grads(MemoryTag::Gradients);
    const Tensor f32 = param.grad().to(DType::F32);
    if (Tensor accumulated = master.grad(); accumulated.defined())
      add_(accumulated, f32);  // in place
    else
      master.set_grad(f32.shares_storage(param.grad()) ? f32.clone() : f32.contiguous());
    param.zero_grad();  // the 16-bit gradient is folded in: free it
  }
  if (reducer_) reducer_->gradient_ready(i);
}

void ReplicatedState::begin_backward(bool boundary) {
  boundary_ = boundary;
  // An optimizer that communicates itself (1-bit Adam once compressed) takes local gradients.
  const bool optimizer_reduces = optimizer() && !optimizer()->wants_reduced_gradients();
  if (reducer_) reducer_->prepare_backward(boundary && reduce_gradients_ && !optimizer_reduces);
}

void ReplicatedState::end_backward() {
  if (reducer_) reducer_->finish_backward();
}

std::vector<Tensor> ReplicatedState::gradients() const {
  std::vector<Tensor> grads;
  for (const auto& [name, variable] : updated())
    if (variable.grad().defined()) grads.push_back(variable.grad());
  return grads;
}

bool ReplicatedState::local_overflow() const { return has_inf_or_nan(gradients()); }

double ReplicatedState::local_norm() const {
  const int tensor_rank = layout_.groups.tensor().rank();
  std::vector<Tensor> counted;
  for (size_t i = 0; i < params_.size(); ++i)
    if (const Tensor& grad = updated()[i].second.grad();
        grad.defined() && layout_.placements[i].counted_at(tensor_rank))
      counted.push_back(grad);
  return global_norm(counted);
}

void ReplicatedState::scale_gradients(double factor) { scale_tensors(gradients(), factor); }

void ReplicatedState::step() {
  FATHOM_CHECK(optimizer_ != nullptr, "training state: step() without an optimizer (this engine evaluates only)");
  optimizer_->step();
  if (!keeps_masters_) return;
  autograd::NoGradGuard no_grad;
  std::vector<ScaleTensors> pairs;  // one multi-tensor launch: model = round(master)
  for (size_t i = 0; i < params_.size(); ++i) pairs.push_back({masters_[i].second.data(), params_[i].second.data()});
  scale_multi(pairs, 1.0);
}

void ReplicatedState::sum_tied_gradients(parallel::Communicator& tie, const std::vector<size_t>& parameters) {
  for (const size_t i : parameters) {
    const autograd::Variable& holder = updated().at(i).second;
    if (!holder.grad().defined()) {
      MemoryTagScope tag(MemoryTag::Gradients);
      holder.set_grad(Tensor::zeros(holder.sizes(), holder.dtype(), holder.device()));
    }
    tie.all_reduce(holder.grad());
  }
}

void ReplicatedState::zero_grad() {
  for (const auto& [name, param] : params_) param.zero_grad();
  for (const auto& [name, master] : masters_) master.zero_grad();
}

Tensor ReplicatedState::concatenated(const NamedParameters& params, DType dtype) const {
  Tensor flat = Tensor::empty({optimizer_layout_.covers.size()}, dtype);
  for (size_t s = 0; s < slots_.size(); ++s)
    flat.narrow(0, slots_[s].offset, slots_[s].numel)
        .copy_(params[s].second.data().contiguous().view({slots_[s].numel}));
  return flat;
}

void ReplicatedState::scatter(const Tensor& flat, const NamedParameters& params) const {
  for (size_t s = 0; s < slots_.size(); ++s)
    params[s].second.data().copy_(flat.narrow(0, slots_[s].offset, slots_[s].numel).view(slots_[s].shape));
}

std::vector<FlatRange> ReplicatedState::flat_ranges(Range wanted) const {
  if (wanted.size() == 0) return {};  // every rank holds the same: only the one that saves copies
  autograd::NoGradGuard no_grad;
  const Range all = optimizer_layout_.covers;
  std::vector<FlatRange> out = {{"param", concatenated(params_, parameter_dtype()), all}};
  if (keeps_masters_) out.push_back({"master", concatenated(masters_, DType::F32), all});
  if (optimizer_)
    for (FlatRange& state : optimizer_flat_ranges(*optimizer_, optimizer_layout_)) out.push_back(std::move(state));
  return out;
}

void ReplicatedState::load_flat_ranges(const FlatReader& read, const SavedStates& saved) {
  autograd::NoGradGuard no_grad;
  const Range all = optimizer_layout_.covers;
  // An f32 model takes the fp32 masters when the checkpoint has them.
  Tensor flat = Tensor::empty({all.size()}, parameter_dtype());
  read(saved.has_master && !keeps_masters_ ? "master" : "param", flat, all);
  scatter(flat, params_);
  if (keeps_masters_) {
    Tensor masters = Tensor::empty({all.size()}, DType::F32);
    read(saved.has_master ? "master" : "param", masters, all);
    scatter(masters, masters_);
  }
  if (optimizer_) load_optimizer_flat_ranges(*optimizer_, optimizer_layout_, read, saved);
}

int64_t ReplicatedState::optimizer_steps() const {
  return optimizer_ ? optimizer_step_count(*optimizer_, optimizer_layout_) : 0;
}

std::vector<std::string> ReplicatedState::optimizer_state_names() const {
  return optimizer_ ? zero::optimizer_state_names(*optimizer_, optimizer_layout_) : std::vector<std::string>{};
}

}  // namespace fathom::zero
