#include "zero/optimizer_shard.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "offload/device_transfers.h"
#include "offload/host_memory.h"
#include "offload/tensor_swapper.h"
#include "zero/flat_optimizer_state.h"

namespace fathom::zero {

using Tier = OptimizerOffload::Tier;

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::Device:
      return "device";
    case Tier::Host:
      return "cpu";
    case Tier::Nvme:
      return "nvme";
  }
  return "?";
}

OptimizerShard::OptimizerShard(ParameterStore& params, Range covers, bool keeps_masters, OptimizerOffload offload,
                               const OptimizerFactory& make_optimizer)
    : params_(params), covers_(covers), offload_(std::move(offload)) {
  FATHOM_CHECK(offload_.sub_group_elements > 0, "config error at zero_optimization.sub_group_size: must be > 0");
  FATHOM_CHECK(offload_.ratio > 0.0 && offload_.ratio <= 1.0,
               "config error at zero_optimization.offload_optimizer.ratio: must be in (0, 1], got ", offload_.ratio);
  if (offload_.tier == Tier::Nvme) {
    // One directory per shard: two engines of one process (a test, an evaluation copy) never share files.
    static std::atomic<int> shards{0};
    swapper_ = std::make_unique<offload::TensorSwapper>(
        offload_.swap_directory + "/optimizer" + std::to_string(shards.fetch_add(1)), offload_.aio, offload_.backend);
  }
  if (offloaded() && params_.device().is_cuda())
    transfers_ = std::make_unique<offload::DeviceTransfers>(params_.device().index);
  build_sub_groups(keeps_masters);

  NamedParameters named;
  for (const SubGroup& g : groups_) named.emplace_back(g.master.name(), g.master);
  if (make_optimizer) optimizer_ = make_optimizer(named);
  if (optimizer_) attach_copies();
  layout_.covers = covers_;
  for (const SubGroup& g : groups_) {
    layout_.keys.push_back(g.master.name());
    layout_.slots.push_back({g.master.name(), {g.range.size()}, g.range.begin, g.range.size()});
  }
  if (swapper_ && optimizer_) check_buffer_count();
}

OptimizerShard::~OptimizerShard() = default;

// Sub-groups of sub_group_size elements; the first `ratio` of them on the offload tier. With
// nvme each is swapped out as soon as it exists, so the shard is never whole in memory.
void OptimizerShard::build_sub_groups(bool keeps_masters) {
  const int64_t n = params_.numel();
  const int64_t size = offload_.sub_group_elements;
  const int64_t count = std::max<int64_t>(1, (n + size - 1) / size);
  const auto offloaded = static_cast<int64_t>(std::llround(offload_.ratio * static_cast<double>(count)));
  autograd::NoGradGuard no_grad;
  for (int64_t k = 0; k < count; ++k) {
    SubGroup g;
    g.range = {std::min(n, k * size), std::min(n, (k + 1) * size)};
    g.tier = k < std::max<int64_t>(offloaded, 1) ? offload_.tier : Tier::Device;
    g.separate_master = keeps_masters || g.tier != Tier::Device || !params_.resident().defined();
    const std::string name = count == 1 ? "zero_shard" : "zero_shard." + std::to_string(k);
    const Tensor slice = params_.read(g.range);
    Tensor data = slice;
    if (g.separate_master) {
      MemoryTagScope tag(MemoryTag::MasterWeights);
      std::optional<offload::HostTierScope> host;
      if (g.tier != Tier::Device) host.emplace(offload_.pin_memory);
      data = Tensor::empty({g.range.size()}, DType::F32, g.tier == Tier::Device ? params_.device() : kCPU);
      data.copy_(slice);
    }
    g.master = autograd::Variable(data, true, name);
    groups_.push_back(std::move(g));
    if (groups_.back().tier == Tier::Nvme) {
      groups_.back().swap_group = swapper_->add_group();
      swap_out(groups_.size() - 1);
    }
  }
}

// With both pipelines three sub-groups are in memory at once: k-1 being written, k being
// updated, k+1 being read; each holds its master and the optimizer's states.
void OptimizerShard::check_buffer_count() const {
  const int64_t per_group = 1 + static_cast<int64_t>(optimizer_->element_state_names().size());
  const int64_t in_memory = 1 + (offload_.pipeline_read ? 1 : 0) + (offload_.pipeline_write ? 1 : 0);
  const int64_t needed = per_group * in_memory;
  FATHOM_CHECK(offload_.buffer_count >= needed,
               "config error at zero_optimization.offload_optimizer.buffer_count: ", offload_.buffer_count,
               " buffers are too few: ", optimizer_->type(), " keeps ", per_group,
               " tensors per sub-group (the fp32 master and its ", per_group - 1, " states) and ", in_memory,
               " sub-group", in_memory == 1 ? " is" : "s are", " in memory at once",
               in_memory > 1 ? " (pipeline_read / pipeline_write)" : "", ", so it needs ", needed,
               "; set buffer_count to ", needed, " or more");
}

std::vector<Range> OptimizerShard::sub_group_ranges() const {
  std::vector<Range> ranges;
  for (const SubGroup& g : groups_) ranges.push_back(g.range);
  return ranges;
}

std::vector<size_t> OptimizerShard::groups_on(Tier tier) const {
  std::vector<size_t> out;
  for (size_t k = 0; k < groups_.size(); ++k)
    if (groups_[k].tier == tier) out.push_back(k);
  return out;
}

void OptimizerShard::step(GradientShard& gradient) {
  FATHOM_CHECK(optimizer_ != nullptr, "training state: step() without an optimizer (this engine evaluates only)");
  FATHOM_CHECK(gradient.complete(), "ZeRO: step() before the boundary's gradients were taken");
  autograd::NoGradGuard no_grad;
  for (const size_t k : groups_on(Tier::Device)) step_group(k, gradient);
  std::optional<offload::HostTierScope> host;
  if (offloaded()) host.emplace(offload_.pin_memory);
  for (const size_t k : groups_on(Tier::Host)) step_group(k, gradient);
  step_swapped(groups_on(Tier::Nvme), gradient);
  if (transfers_) transfers_->finish();  // the updated parameters are on the GPU
}

// Elementwise optimizers give the same values stepping sub-groups one at a time as together;
// one at a time, a swapped gradient needs only one sub-group in memory.
void OptimizerShard::step_group(size_t k, GradientShard& gradient) {
  const SubGroup& g = groups_[k];
  Tensor grad = gradient.read(g.range);
  if (grad.device() != g.master.device()) grad = grad.to(g.master.device());
  g.master.set_grad(grad);
  optimizer_->step();
  g.master.zero_grad();
  gradient.done_with(g.range);
  publish(g);
}

// Where the optimizer writes each separate master's rounded copy: the parameters themselves when
// they are in memory on the master's device, else (a GPU model offloaded) pinned memory to upload
// from; swapped parameters get none (publish assigns them).
void OptimizerShard::attach_copies() {
  const Tensor resident = params_.resident();
  if (!resident.defined()) return;
  for (SubGroup& g : groups_) {
    if (!g.separate_master) continue;
    Tensor target = resident.narrow(0, g.range.begin, g.range.size());
    if (g.master.device() != params_.device()) {
      MemoryTagScope tag(MemoryTag::Communication);
      offload::HostTierScope host(offload_.pin_memory);
      target = g.upload = Tensor::empty({g.range.size()}, params_.dtype());
    }
    optimizer_->set_copy(g.master, target);
  }
}

void OptimizerShard::publish(const SubGroup& g) const {
  if (g.upload.defined()) transfers_->to_device(params_.resident().narrow(0, g.range.begin, g.range.size()), g.upload);
  else if (!params_.resident().defined()) params_.assign(g.range, g.master.data());  // rounds once
}

void OptimizerShard::write_back(const SubGroup& g) const {
  if (g.separate_master) params_.assign(g.range, g.master.data());  // rounds once
}

std::vector<Tensor> OptimizerShard::swapped_tensors(const SubGroup& g) const {
  std::vector<Tensor> tensors{g.master.data()};
  if (g.has_states)
    for (const std::string& state : optimizer_->element_state_names())
      tensors.push_back(optimizer_->state(g.master, state));
  return tensors;
}

void OptimizerShard::swap_out(size_t k) const {
  const SubGroup& g = groups_[k];
  swapper_->begin_swap_out(g.swap_group, swapped_tensors(g));
  swapper_->finish_swap_out(g.swap_group);
}

void OptimizerShard::swap_in(size_t k) const {
  const SubGroup& g = groups_[k];
  swapper_->begin_swap_in(g.swap_group, swapped_tensors(g));
  swapper_->finish_swap_in(g.swap_group);
}

// Sub-group k is read (unless its read was started during k-1), updated, and written; with
// pipeline_read k+1's read starts before k's update, with pipeline_write k's write is finished
// only after k+1's update.
void OptimizerShard::step_swapped(const std::vector<size_t>& groups, GradientShard& gradient) {
  std::optional<size_t> reading, writing;
  for (size_t i = 0; i < groups.size(); ++i) {
    SubGroup& g = groups_[groups[i]];
    const bool read_started = reading.has_value() && *reading == groups[i];
    if (!read_started) swapper_->begin_swap_in(g.swap_group, swapped_tensors(g));
    swapper_->finish_swap_in(g.swap_group);
    reading.reset();
    if (offload_.pipeline_read && i + 1 < groups.size()) {
      const SubGroup& next = groups_[groups[i + 1]];
      swapper_->begin_swap_in(next.swap_group, swapped_tensors(next));
      gradient.prefetch(next.range);
      reading = groups[i + 1];
    }
    step_group(groups[i], gradient);
    g.has_states = true;
    swapper_->begin_swap_out(g.swap_group, swapped_tensors(g));
    if (writing) swapper_->finish_swap_out(groups_[*writing].swap_group);
    writing = groups[i];
    if (!offload_.pipeline_write) {
      swapper_->finish_swap_out(g.swap_group);
      writing.reset();
    }
  }
  if (writing) swapper_->finish_swap_out(groups_[*writing].swap_group);
}

std::vector<FlatRange> OptimizerShard::flat_ranges(bool with_master) const {
  if (!swapper_) return resident_flat_ranges(with_master);
  // Swapped: each state streamed to the checkpoint a part at a time, from the sub-groups it spans;
  // the last sub-group read stays in memory for the next part (the checkpoint writes one state
  // after another, each in ascending order).
  auto view = std::make_shared<SwappedView>(*this);
  std::vector<std::string> names;
  if (with_master) names.push_back("master");
  if (optimizer_)
    for (const std::string& state : optimizer_state_names(*optimizer_, layout_)) names.push_back("optim." + state);
  std::vector<FlatRange> out;
  for (const std::string& name : names)
    out.push_back({.name = name,
                   .values = Tensor(),
                   .covers = covers_,
                   .stream = [view, name](Range part) { return view->read(name, part); },
                   .stream_dtype = DType::F32});
  return out;
}

std::vector<FlatRange> OptimizerShard::resident_flat_ranges(bool with_master) const {
  std::vector<FlatRange> out;
  if (with_master) {
    Tensor master = groups_.size() == 1 ? groups_[0].master.data() : Tensor::empty({covers_.size()}, DType::F32);
    if (groups_.size() > 1)
      for (const SubGroup& g : groups_) master.narrow(0, g.range.begin, g.range.size()).copy_(g.master.data());
    out.push_back({"master", master, covers_});
  }
  if (optimizer_)
    for (FlatRange& state : optimizer_flat_ranges(*optimizer_, layout_)) out.push_back(std::move(state));
  return out;
}

OptimizerShard::SwappedView::~SwappedView() {
  if (loaded) shard.drop(*loaded);
}

Tensor OptimizerShard::SwappedView::read(const std::string& name, Range part) {
  const Range local{part.begin - shard.covers_.begin, part.end - shard.covers_.begin};
  Tensor out = Tensor::empty({local.size()}, DType::F32);
  for (size_t k = 0; k < shard.groups_.size(); ++k) {
    const SubGroup& g = shard.groups_[k];
    const Range mine{std::max(g.range.begin, local.begin), std::min(g.range.end, local.end)};
    if (mine.size() <= 0) continue;
    if (g.tier == Tier::Nvme && loaded != k) {
      if (loaded) shard.drop(*loaded);
      loaded.reset();
      shard.swap_in(k);
      loaded = k;
    }
    const Tensor values = name == "master" ? g.master.data()
                                           : shard.optimizer_->state(g.master, name.substr(name.find('.') + 1));
    out.narrow(0, mine.begin - local.begin, mine.size())
        .copy_(values.reshape({-1}).narrow(0, mine.begin - g.range.begin, mine.size()));
  }
  return out;
}

// A sub-group read only to be looked at: its file still holds the same values.
void OptimizerShard::drop(size_t k) const {
  for (const Tensor& t : swapped_tensors(groups_[k])) t.storage()->release();
}

void OptimizerShard::load(const FlatReader& read, const SavedStates& saved, const std::string& master_source) {
  autograd::NoGradGuard no_grad;
  if (swapper_) return load_by_sub_group(read, saved, master_source);
  for (const SubGroup& g : groups_) {
    if (!g.separate_master) continue;  // the parameters, loaded by the caller
    read(master_source, g.master.data(), {covers_.begin + g.range.begin, covers_.begin + g.range.end});
    write_back(g);
  }
  params_.flush();
  if (optimizer_) {
    std::optional<offload::HostTierScope> host;
    if (offloaded()) host.emplace(offload_.pin_memory);
    load_optimizer_flat_ranges(*optimizer_, layout_, read, saved);
  }
}

// Swapped sub-groups are loaded one at a time — master and states read into memory, written to
// the sub-group's file, released — so a shard larger than memory loads too.
void OptimizerShard::load_by_sub_group(const FlatReader& read, const SavedStates& saved,
                                       const std::string& master_source) {
  std::vector<std::string> states;
  if (optimizer_ && saved.optimizer_step > 0) {
    states = optimizer_->element_state_names();
    std::vector<std::string> mine = states, theirs = saved.optimizer_states;
    std::sort(mine.begin(), mine.end());
    std::sort(theirs.begin(), theirs.end());
    const auto listed = [](const std::vector<std::string>& names) {
      std::string out;
      for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
      return out;
    };
    FATHOM_CHECK(mine == theirs, "checkpoint: its optimizer states (", listed(theirs), ") are not ", optimizer_->type(),
                 "'s (", listed(mine), "); was it saved with another optimizer?");
  }
  if (optimizer_) optimizer_->load_state_dict(saved.scalars);  // lr and weight decay; every state cleared
  for (size_t k = 0; k < groups_.size(); ++k) {
    SubGroup& g = groups_[k];
    std::optional<offload::HostTierScope> host;
    if (g.tier != Tier::Device) host.emplace(offload_.pin_memory);
    if (g.tier == Tier::Nvme) g.master.data().storage()->refill();  // replaced: nothing to read back
    const Range flat{covers_.begin + g.range.begin, covers_.begin + g.range.end};
    if (g.separate_master) {
      read(master_source, g.master.data(), flat);
      write_back(g);
    }
    if (!states.empty()) {
      std::vector<Tensor> buffers;
      for (const std::string& state : states) {
        {
          MemoryTagScope tag(MemoryTag::OptimizerState);
          buffers.push_back(Tensor::empty(g.master.sizes(), DType::F32, g.master.device()));
        }
        read("optim." + state, buffers.back(), flat);
      }
      optimizer_->load_param_state(g.master, saved.optimizer_step, std::move(buffers));
    }
    if (g.tier == Tier::Nvme) {
      g.has_states = !states.empty();
      swap_out(k);
    }
  }
  params_.flush();
}

std::optional<offload::IoEngine::Counters> OptimizerShard::io_counters() const {
  if (!swapper_) return std::nullopt;
  return swapper_->engine().counters();
}

}  // namespace fathom::zero
