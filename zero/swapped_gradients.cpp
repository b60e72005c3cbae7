#include "zero/swapped_gradients.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/memory_stats.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"
#include "offload/host_memory.h"
#include "zero/training_state.h"

namespace fathom::zero {

namespace {
Range intersection(Range a, Range b) {
  const int64_t begin = std::max(a.begin, b.begin);
  return {begin, std::max(begin, std::min(a.end, b.end))};
}

// Gradient memory in the host tier, where swap files can read into and write from.
struct InTier {
  MemoryTagScope tag{MemoryTag::Gradients};
  offload::HostTierScope host;
  explicit InTier(bool pinned) : host(pinned) {}
};
}  // namespace

SwappedGradients::SwappedGradients(std::vector<Range> groups, DType accumulated, std::vector<Range> counted,
                                   Options options)
    : GradientShard(groups.empty() ? 0 : groups.back().end, std::move(counted), options.norm_block),
      accumulated_(accumulated),
      options_(std::move(options)),
      swapper_(std::make_unique<offload::TensorSwapper>(options_.directory, options_.aio, options_.backend)) {
  int64_t next = 0;
  for (const Range& range : groups) {
    FATHOM_CHECK(range.begin == next && range.end >= range.begin, "SwappedGradients: sub-groups must cover the shard "
                 "in order");
    next = range.end;
    groups_.emplace_back();
    groups_.back().range = range;
    groups_.back().file = swapper_->add_group();
  }
  squares_.assign(pieces().size(), 0.0);
}

SwappedGradients::~SwappedGradients() = default;

size_t SwappedGradients::group_at(int64_t offset) const {
  const auto after = std::upper_bound(groups_.begin(), groups_.end(), offset,
                                      [](int64_t value, const Group& g) { return value < g.range.begin; });
  FATHOM_CHECK(after != groups_.begin() && offset < numel(), "SwappedGradients: element ", offset,
               " is outside the shard of ", numel());
  return static_cast<size_t>(after - groups_.begin()) - 1;
}

size_t SwappedGradients::group_of(Range range) const {
  const size_t g = group_at(range.begin);
  FATHOM_CHECK(groups_[g].range.begin == range.begin && groups_[g].range.end == range.end, "SwappedGradients: [",
               range.begin, ", ", range.end, ") is not one of the optimizer's sub-groups");
  return g;
}

void SwappedGradients::track(int64_t elements) {
  resident_ += elements;
  peak_resident_ = std::max(peak_resident_, resident_);
}

void SwappedGradients::bring_in(size_t g) {
  Group& group = groups_[g];
  if (group.state == State::InMemory) return;
  if (group.state == State::Reading) return finish_read(g);
  if (group.writing) finish_write(g);
  InTier tier(options_.pin_memory);
  track(group.range.size());
  if (group.state == State::Zero) {
    group.values = Tensor::zeros({group.range.size()}, complete_ ? DType::F32 : accumulated_);
    group.state = State::InMemory;
    return;
  }
  swapper_->begin_swap_in(group.file, {group.values});
  group.state = State::Reading;
  finish_read(g);
}

void SwappedGradients::finish_read(size_t g) {
  swapper_->finish_swap_in(groups_[g].file);
  groups_[g].state = State::InMemory;
}

void SwappedGradients::write_out(size_t g, bool complete) {
  Group& group = groups_[g];
  if (complete) {
    if (group.values.dtype() != DType::F32) {
      InTier tier(options_.pin_memory);
      group.values = group.values.to(DType::F32);
    }
    check(g, group.values);
  }
  group.final = true;
  if (group.range.size() == 0) return drop(g);  // nothing to store
  finish_writes();  // one write in flight at a time
  swapper_->begin_swap_out(group.file, {group.values});
  group.writing = group.in_file = true;
  group.state = State::Stored;
  writes_.push_back(g);
}

void SwappedGradients::finish_write(size_t g) {
  swapper_->finish_swap_out(groups_[g].file);  // frees the memory
  groups_[g].writing = false;
  track(-groups_[g].range.size());
  writes_.erase(std::find(writes_.begin(), writes_.end(), g));
}

void SwappedGradients::finish_writes() {
  while (!writes_.empty()) finish_write(writes_.front());
}

void SwappedGradients::drop(size_t g) {
  Group& group = groups_[g];
  if (group.state == State::Reading) finish_read(g);
  if (group.state != State::InMemory) return;
  group.values.storage()->release();
  group.state = group.in_file ? State::Stored : State::Zero;
  track(-group.range.size());
}

// Backward's parts come in descending shard order: a sub-group above the part is final for this
// backward, and so is one the part covers down to its first element.
void SwappedGradients::add(const Tensor& part, int64_t offset) {
  FATHOM_CHECK(!complete_, "ZeRO: a gradient added after the boundary, before zero_grad");
  const Range range{offset, offset + part.numel()};
  if (range.size() == 0) return;
  for (size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].state == State::InMemory && groups_[g].range.begin >= range.end) write_out(g, boundary_);
  const size_t first = group_at(range.begin), last = group_at(range.end - 1);
  for (size_t g = last + 1; g-- > first;) {
    Group& group = groups_[g];
    FATHOM_CHECK(!group.final, "ZeRO: reduced gradients must arrive in descending shard order; sub-group ", g,
                 " was already written in this backward");
    bring_in(g);
    const Range mine = intersection(range, group.range);
    Tensor target = group.values.narrow(0, mine.begin - group.range.begin, mine.size());
    const Tensor source = part.narrow(0, mine.begin - range.begin, mine.size());
    add_(target, source.dtype() == target.dtype() ? source : source.to(target.dtype()));
    if (group.range.begin >= range.begin) write_out(g, boundary_);
  }
}

void SwappedGradients::assign(Tensor reduced) {
  FATHOM_CHECK(reduced.numel() == numel(), "ZeRO: a reduced gradient of ", reduced.numel(), " elements for a shard of ",
               numel());
  for (size_t g = 0; g < groups_.size(); ++g) {
    Group& group = groups_[g];
    {
      InTier tier(options_.pin_memory);
      group.values = Tensor::empty({group.range.size()}, DType::F32);
    }
    track(group.range.size());
    group.state = State::InMemory;
    group.values.copy_(reduced.narrow(0, group.range.begin, group.range.size()));
    write_out(g, /*complete=*/true);
  }
}

void SwappedGradients::end_backward(bool boundary) {
  for (size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].state == State::InMemory) write_out(g, boundary);
  finish_writes();
  for (Group& group : groups_) group.final = false;
  complete_ = boundary;
}

Tensor SwappedGradients::fp32_values(const Group& group) const {
  InTier tier(options_.pin_memory);
  Tensor values = group.values.dtype() == DType::F32 ? group.values : group.values.to(DType::F32);
  if (group.scales.empty()) return values;
  if (values.storage() == group.values.storage()) values = values.clone();
  for (const double factor : group.scales) scale_tensors({values}, factor);
  return values;
}

// Norm pieces inside the sub-group are counted now; one straddling sub-groups is assembled and
// counted when its last part arrives.
void SwappedGradients::check(size_t g, const Tensor& fp32) {
  Group& group = groups_[g];
  group.inf_or_nan = fathom::has_inf_or_nan({fp32});
  const std::vector<Range>& all = pieces();
  auto p = std::lower_bound(all.begin(), all.end(), group.range.begin,
                            [](const Range& piece, int64_t begin) { return piece.end <= begin; });
  for (; p != all.end() && p->begin < group.range.end; ++p) {
    const size_t index = static_cast<size_t>(p - all.begin());
    const Range mine = intersection(*p, group.range);
    const Tensor values = fp32.narrow(0, mine.begin - group.range.begin, mine.size());
    if (mine.size() == p->size()) {
      squares_[index] = sum_of_squares(values);
      continue;
    }
    Straddling& straddling = straddling_[index];
    if (!straddling.values.defined()) {
      InTier tier(options_.pin_memory);
      straddling.values = Tensor::empty({p->size()}, DType::F32);
      track(p->size());
    }
    straddling.values.narrow(0, mine.begin - p->begin, mine.size()).copy_(values);
    straddling.filled += mine.size();
    if (straddling.filled == p->size()) {
      squares_[index] = sum_of_squares(straddling.values);
      track(-p->size());
      straddling_.erase(index);
    }
  }
  group.checked = true;
}

void SwappedGradients::check_all() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].checked) continue;
    bring_in(g);
    check(g, fp32_values(groups_[g]));
    drop(g);
  }
}

void SwappedGradients::forget_checks() {
  for (Group& group : groups_) group.checked = false;
  for (const auto& [index, straddling] : straddling_) track(-pieces()[index].size());
  straddling_.clear();
}

bool SwappedGradients::has_inf_or_nan() {
  if (!complete_) return false;
  check_all();
  return std::any_of(groups_.begin(), groups_.end(), [](const Group& g) { return g.inf_or_nan; });
}

// The pieces' squares summed in order, as global_norm sums its tensors'.
double SwappedGradients::norm() {
  if (!complete_) return 0.0;
  check_all();
  double total = 0;
  for (const double squares : squares_) total += squares;
  return std::sqrt(total);
}

void SwappedGradients::scale(double factor) {
  if (!complete_ || factor == 1.0) return;
  for (Group& group : groups_) group.scales.push_back(factor);
  forget_checks();
}

// A whole sub-group (the optimizer's walk) is read in and kept until done_with; any other range
// (ties) is copied out of the sub-groups it spans.
Tensor SwappedGradients::read(Range range) {
  FATHOM_CHECK(complete_, "ZeRO: the gradient read before the boundary's reductions");
  const size_t first = group_at(range.begin);
  if (groups_[first].range.begin == range.begin && groups_[first].range.end == range.end) {
    bring_in(first);
    return fp32_values(groups_[first]);
  }
  Tensor out;
  {
    InTier tier(options_.pin_memory);
    out = Tensor::empty({range.size()}, DType::F32);
  }
  for (size_t g = first; g < groups_.size() && groups_[g].range.begin < range.end; ++g) {
    bring_in(g);
    const Range mine = intersection(range, groups_[g].range);
    out.narrow(0, mine.begin - range.begin, mine.size())
        .copy_(fp32_values(groups_[g]).narrow(0, mine.begin - groups_[g].range.begin, mine.size()));
    drop(g);
  }
  return out;
}

// Ties replace values: each sub-group touched is made fp32 with its scales applied, changed and
// written again.
void SwappedGradients::write(Range range, const Tensor& values) {
  FATHOM_CHECK(complete_, "ZeRO: the gradient written before the boundary's reductions");
  if (range.size() == 0) return;
  forget_checks();
  for (size_t g = group_at(range.begin); g < groups_.size() && groups_[g].range.begin < range.end; ++g) {
    Group& group = groups_[g];
    bring_in(g);
    group.values = fp32_values(group);
    group.scales.clear();
    const Range mine = intersection(range, group.range);
    group.values.narrow(0, mine.begin - group.range.begin, mine.size())
        .copy_(values.narrow(0, mine.begin - range.begin, mine.size()));
    write_out(g, /*complete=*/false);
  }
  finish_writes();
  for (Group& group : groups_) group.final = false;
}

void SwappedGradients::prefetch(Range range) {
  const size_t g = group_of(range);
  Group& group = groups_[g];
  if (group.state != State::Stored || group.writing) return;
  InTier tier(options_.pin_memory);
  track(group.range.size());
  swapper_->begin_swap_in(group.file, {group.values});
  group.state = State::Reading;
}

void SwappedGradients::done_with(Range range) { drop(group_of(range)); }

void SwappedGradients::zero() {
  finish_writes();
  for (size_t g = 0; g < groups_.size(); ++g) {
    drop(g);
    Group& group = groups_[g];
    Group fresh;  // zero again: no values, no file contents that count, no scales or checks
    fresh.range = group.range;
    fresh.file = group.file;
    group = std::move(fresh);
  }
  forget_checks();
  squares_.assign(pieces().size(), 0.0);
  complete_ = false;
}

}  // namespace fathom::zero
