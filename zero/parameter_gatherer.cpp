#include "zero/parameter_gatherer.h"

#include <algorithm>
#include <utility>
#include <unordered_map>

#include "autograd/checkpoint.h"
#include "autograd/custom_function.h"
#include "core/error.h"
#include "core/memory_stats.h"

namespace fathom::zero {
namespace {
// Identity in forward; its backward gathers a module's parameters before the module's own
// backward nodes read them (they run after it: they produced its inputs).
class GatherBeforeBackward final : public autograd::Function {
 public:
  GatherBeforeBackward(ParameterGatherer& gatherer, size_t module) : gatherer_(gatherer), module_(module) {}
  std::string name() const override { return "zero3_gather_before_backward"; }
  autograd::TensorList forward(const autograd::TensorList& inputs) override { return inputs; }
  autograd::TensorList backward(const autograd::TensorList& grads) override {
    gatherer_.on_module_backward(module_);
    return grads;
  }

 private:
  ParameterGatherer& gatherer_;
  size_t module_;
};
}  // namespace

ParameterGatherer::ParameterGatherer(const FlatParameters& flat, std::shared_ptr<parallel::Communicator> group,
                                     GatherOptions options)
    : flat_(flat), group_(std::move(group)), options_(options) {
  FATHOM_CHECK(flat_.storage() == FlatParameters::Storage::ShardOnly,
               "ParameterGatherer: the flat parameters must be stored sharded (stage 3)");
  const size_t n = flat_.slots().size();
  gathered_.assign(n, false);
  persistent_.assign(n, false);
  pending_.resize(n);
  for (size_t s = 0; s < n; ++s) slot_of_parameter_[flat_.slots()[s].param.impl().get()] = s;
  for (size_t s = 0; s < n; ++s) {
    persistent_[s] = flat_.slots()[s].numel <= options_.persistence_threshold;
    if (!persistent_[s]) continue;
    flat_.shard().check_module(flat_.slots()[s].name, flat_.shard().pieces()[s].range.size());
    finish_gather(s);
  }
}

std::string ParameterGatherer::summary() const {
  const int64_t partitioned = std::count(persistent_.begin(), persistent_.end(), false);
  const Partition& partition = flat_.partition();
  return detail::concat(partitioned, " of ", persistent_.size(), " parameters partitioned over ", group_->size(),
                        " data-parallel rank", group_->size() == 1 ? "" : "s", " (stage3_param_persistence_threshold ",
                        options_.persistence_threshold, "): ", partition.shard_size(), " of ", partition.numel(),
                        " elements per rank");
}

void ParameterGatherer::start_gather(size_t s) {
  if (gathered_[s] || pending_[s].work) return;
  const FlatParameters::Slot& slot = flat_.slots()[s];
  const Partition& partition = flat_.partition();
  const Tensor input = flat_.shard().acquire(s);  // this rank's part, released once gathered
  Tensor full;
  {
    MemoryTagScope tag(MemoryTag::Parameters);
    full = Tensor::empty({slot.numel}, flat_.dtype(), flat_.device());
  }
  // Ranks own consecutive ranges, so their parts concatenated in rank order are the parameter.
  pending_[s] = {full, group_->all_gather_v_async(input, full, partition.counts_within(slot.range()))};
  ++gathers_issued_;
  in_flight_elements_ += slot.numel;
  gathered_elements_ += slot.numel;
  peak_gathered_elements_ = std::max(peak_gathered_elements_, gathered_elements_);
}

void ParameterGatherer::finish_gather(size_t s) {
  if (gathered_[s]) return;
  start_gather(s);
  pending_[s].work->wait();
  flat_.shard().release(s);
  const FlatParameters::Slot& slot = flat_.slots()[s];
  in_flight_elements_ -= slot.numel;
  slot.param.set_data(pending_[s].full.view(slot.shape));
  pending_[s] = {};
  gathered_[s] = true;
}

void ParameterGatherer::on_module_backward(size_t m) {
  events_.push_back({Event::ModuleBackwardStarted, static_cast<int>(m)});
  for (size_t s : module_slots_[m]) finish_gather(s);
  if (recording_) return;
  // Backward visits the recorded path in reverse: the last position of m before the one reached.
  size_t found = backward_position_;
  while (found > 0 && order_[found - 1] != m) --found;
  if (found == 0) return;  // off the path
  backward_position_ = found - 1;
  if (backward_position_ > 0) read_ahead(backward_position_ - 1, -1);
}

void ParameterGatherer::release(size_t s) {
  if (persistent_[s]) return;
  if (pending_[s].work) finish_gather(s);  // a prefetch nobody used: complete it before dropping
  if (!gathered_[s]) return;
  const FlatParameters::Slot& slot = flat_.slots()[s];
  slot.param.set_data(flat_.released(flat_.dtype()));
  gathered_[s] = false;
  gathered_elements_ -= slot.numel;
}

void ParameterGatherer::release_full_parameters() {
  full_ = false;
  for (size_t s = 0; s < gathered_.size(); ++s) release(s);
  if (!order_.empty()) recording_ = false;  // the first step's order is known
  cursor_ = 0;
  position_ = backward_position_ = order_.size();
  flat_.shard().settle();
  if (!events_.empty()) last_step_events_ = std::exchange(events_, {});
}

void ParameterGatherer::gather_full_parameters() {
  for (size_t s = 0; s < gathered_.size(); ++s) finish_gather(s);
  full_ = true;
}

std::vector<size_t> ParameterGatherer::slots_of(const nn::Module& part) const {
  std::vector<size_t> slots;
  for (const auto& [name, param] : part.named_parameters()) {
    const auto found = slot_of_parameter_.find(param.impl().get());
    FATHOM_CHECK(found != slot_of_parameter_.end(), "ParameterGatherer: parameter ", name,
                 " of the part asked for is not one of the sharded model's");
    slots.push_back(found->second);
  }
  return slots;
}

void ParameterGatherer::gather_parameters_of(const nn::Module& part) {
  for (size_t s : slots_of(part)) finish_gather(s);
}

void ParameterGatherer::release_parameters_of(const nn::Module& part) {
  for (size_t s : slots_of(part)) release(s);
}

void ParameterGatherer::reload_parameters() {
  for (size_t s = 0; s < gathered_.size(); ++s) {
    if (!persistent_[s]) continue;
    gathered_[s] = false;
    gathered_elements_ -= flat_.slots()[s].numel;
    finish_gather(s);
  }
}

void ParameterGatherer::install_hooks(nn::Module& model) {
  std::unordered_map<const void*, size_t> slot_of;
  for (size_t s = 0; s < flat_.slots().size(); ++s) slot_of[flat_.slots()[s].param.impl().get()] = s;
  for (auto& [name, module] : model.named_modules()) {
    std::vector<size_t> slots;
    for (const auto& [param_name, param] : module->named_parameters(/*recurse=*/false))
      if (auto it = slot_of.find(param.impl().get()); it != slot_of.end() && !persistent_[it->second])
        slots.push_back(it->second);
    if (slots.empty()) continue;
    int64_t shard_elements = 0;
    for (size_t s : slots) shard_elements += flat_.shard().pieces()[s].range.size();
    flat_.shard().check_module(name, shard_elements);
    const size_t m = module_slots_.size();
    module_slots_.push_back(slots);
    hooks_.push_back(module->register_forward_pre_hook(
        [this, m](nn::Module&, autograd::VariableList&) { on_module_forward(m, true); }));
    hooks_.push_back(module->register_forward_hook([this, m](nn::Module&, const autograd::VariableList&,
                                                             autograd::VariableList& outputs) {
      on_module_forward(m, false);
      if (autograd::is_recomputing()) return;  // the recomputed graph is not the one backward runs
      autograd::VariableList needs_grad;
      std::vector<size_t> where;
      for (size_t i = 0; i < outputs.size(); ++i)
        if (outputs[i].requires_grad()) needs_grad.push_back(outputs[i]), where.push_back(i);
      if (needs_grad.empty()) return;
      const autograd::VariableList wrapped =
          autograd::apply_function(std::make_shared<GatherBeforeBackward>(*this, m), needs_grad);
      for (size_t i = 0; i < where.size(); ++i) outputs[where[i]] = wrapped[i];
    }));
  }
}

void ParameterGatherer::on_module_forward(size_t m, bool start) {
  // Activation checkpointing re-runs a segment's forwards inside backward, just before the
  // segment's backward reads their parameters: gather and keep them (each is released when its
  // gradient is final, as in any backward). The recorded path and prefetch follow the first
  // forward only.
  if (full_) return;
  if (autograd::is_recomputing()) {
    if (start)
      for (size_t s : module_slots_[m]) finish_gather(s);
    return;
  }
  events_.push_back({start ? Event::ModuleForwardStarted : Event::ModuleForwardEnded, static_cast<int>(m)});
  if (!start) {
    for (size_t s : module_slots_[m])
      if (!reused_soon(s)) release(s);
    return;
  }
  if (recording_) {
    order_.push_back(m);
  } else {
    // Where this module is on the recorded path (npos when off it, e.g. in evaluation).
    size_t found = cursor_;
    while (found < order_.size() && order_[found] != m) ++found;
    position_ = found;
    if (found < order_.size()) cursor_ = found + 1;
  }
  for (size_t s : module_slots_[m]) finish_gather(s);
  prefetch_after(m);
  if (!recording_ && position_ < order_.size()) read_ahead(position_ + 1, +1);
}

// stage3_max_reuse_distance: a parameter the recorded path uses again before that many other
// parameter elements are gathered stays gathered (GPT's tied embedding, a module called twice).
bool ParameterGatherer::reused_soon(size_t s) const {
  if (recording_ || position_ >= order_.size()) return false;
  int64_t distance = 0;
  for (size_t q = position_ + 1; q < order_.size(); ++q)
    for (size_t t : module_slots_[order_[q]]) {
      if (t == s) return true;
      distance += flat_.slots()[t].numel;
      if (distance > options_.max_reuse_distance) return false;
    }
  return false;
}

// Starts the gathers of the modules expected next, from the first step's order.
void ParameterGatherer::prefetch_after(size_t m) {
  if (recording_ || position_ >= order_.size()) return;  // off the recorded path: no prefetch
  if (!flat_.shard().gathers_ahead()) return;
  // stage3_prefetch_bucket_size bounds what is in flight ahead of use, not what one module adds.
  int64_t budget = options_.prefetch_elements - in_flight_elements_;
  for (size_t next = position_ + 1; next < order_.size() && budget > 0; ++next) {
    for (size_t s : module_slots_[order_[next]]) {
      if (gathered_[s] || pending_[s].work) continue;
      const int64_t numel = flat_.slots()[s].numel;
      if (numel > budget || gathered_elements_ + numel > options_.max_live_elements) return;
      start_gather(s);
      budget -= numel;
      events_.push_back({Event::PrefetchIssued, static_cast<int>(order_[next])});
    }
  }
}

// Reads of the pieces the recorded path needs next, in its order, as far as prefetch_elements
// of parameters ahead and no further than stage3_max_live_parameters allows beside what is
// gathered; the store says no when its buffers or memory bound are full.
void ParameterGatherer::read_ahead(size_t position, int direction) {
  int64_t budget = std::min(options_.prefetch_elements, options_.max_live_elements - gathered_elements_);
  for (auto i = static_cast<int64_t>(position); i >= 0 && i < static_cast<int64_t>(order_.size()) && budget > 0;
       i += direction) {
    const size_t m = order_[static_cast<size_t>(i)];
    for (size_t s : module_slots_[m]) {
      if (gathered_[s] || pending_[s].work) continue;
      budget -= flat_.slots()[s].numel;
      if (flat_.shard().prefetch(s)) events_.push_back({Event::ReadIssued, static_cast<int>(m)});
    }
  }
}

}  // namespace fathom::zero
