#include "zero/swapped_parameters.h"

#include <algorithm>
#include <atomic>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "core/storage.h"
#include "offload/host_memory.h"

namespace fathom::zero {
namespace {
constexpr const char* kKey = "zero_optimization.offload_param";
}

SwappedParameters::SwappedParameters(const ParameterOffload& offload, std::vector<Piece> pieces, int64_t numel,
                                     DType dtype, Device device)
    : ParameterStore(std::move(pieces), numel, dtype, device), options_(offload) {
  FATHOM_CHECK(device.is_cpu(), "SwappedParameters: the pieces live on the host, not ", device.str(),
               " (StagedParameters serves a GPU model from them)");
  FATHOM_CHECK(options_.buffer_count >= 1, "config error at ", kKey, ".buffer_count: must be >= 1, got ",
               options_.buffer_count);
  const Piece* largest = nullptr;
  for (const Piece& piece : this->pieces())
    if (largest == nullptr || piece.range.size() > largest->range.size()) largest = &piece;
  largest_ = largest != nullptr ? largest->range.size() : 0;
  if (largest != nullptr) {
    FATHOM_CHECK(largest_ <= options_.buffer_elements, "config error at ", kKey, ".buffer_size: ",
                 options_.buffer_elements, " elements cannot hold this rank's part of \"", largest->name, "\" (",
                 largest_, " elements); set buffer_size to ", largest_, " or more");
    FATHOM_CHECK(largest_ <= options_.max_in_cpu, "config error at ", kKey, ".max_in_cpu: ", options_.max_in_cpu,
                 " elements cannot hold this rank's part of \"", largest->name, "\" (", largest_,
                 " elements); set max_in_cpu to ", largest_, " or more");
  }
  static std::atomic<int> stores{0};
  swapper_ = std::make_unique<offload::TensorSwapper>(
      options_.swap_directory + "/param" + std::to_string(stores.fetch_add(1)), options_.aio, options_.backend,
      std::string(kKey) + ".nvme_path");
  MemoryTagScope tag(MemoryTag::Parameters);
  offload::HostTierScope host(options_.pin_memory);
  slots_.resize(this->pieces().size());
  for (size_t p = 0; p < slots_.size(); ++p) {
    slots_[p].data = Tensor::empty({size_of(p)}, dtype);
    if (size_of(p) == 0) continue;
    slots_[p].data.storage()->release();
    slots_[p].group = swapper_->add_group();
  }
}

SwappedParameters::~SwappedParameters() = default;  // the swapper finishes its I/O and removes the files

void SwappedParameters::track(int64_t elements) {
  resident_ += elements;
  peak_resident_ = std::max(peak_resident_, resident_);
}

void SwappedParameters::to_cache(size_t p) {
  slots_[p].state = State::Cached;
  slots_[p].in_lru = lru_.insert(lru_.end(), p);
}

void SwappedParameters::out_of_cache(size_t p) {
  lru_.erase(slots_[p].in_lru);
  slots_[p].state = State::InUse;
}

bool SwappedParameters::make_room(int64_t n, int64_t headroom, bool may_wait) {
  auto fits = [&] { return resident_ + n + headroom <= options_.max_in_cpu; };
  while (!fits() && !lru_.empty()) {
    const size_t p = lru_.front();
    out_of_cache(p);
    slots_[p].data.storage()->release();  // clean: the file holds the same values
    slots_[p].state = State::Stored;
    track(-size_of(p));
  }
  while (!fits() && may_wait && !in_flight_.empty()) finish_oldest_io();
  return fits();
}

void SwappedParameters::need_room(size_t p) {
  FATHOM_CHECK(make_room(size_of(p), 0, true), "offload_param: \"", pieces()[p].name, "\" (", size_of(p),
               " elements of this rank's shard) does not fit beside the ", resident_,
               " elements in use under max_in_cpu ", options_.max_in_cpu, "; raise ", kKey, ".max_in_cpu");
  while (static_cast<int64_t>(in_flight_.size()) >= options_.buffer_count) finish_oldest_io();
}

void SwappedParameters::begin_read(size_t p) {
  Slot& slot = slots_[p];
  track(size_of(p));
  if (!slot.on_disk) {  // never assigned: zero, nothing to read
    slot.data.storage()->refill();
    slot.data.zero_();
    slot.state = State::Ahead;
    return;
  }
  swapper_->begin_swap_in(slot.group, {slot.data});
  slot.state = State::Reading;
  in_flight_.push_back(p);
}

void SwappedParameters::finish_read(size_t p) {
  in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), p));
  slots_[p].state = State::Ahead;
  swapper_->finish_swap_in(slots_[p].group);  // checks the file: a damaged one throws here
}

void SwappedParameters::finish_write(size_t p) {
  in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), p));
  slots_[p].state = State::Stored;
  swapper_->finish_swap_out(slots_[p].group);  // releases the memory
  track(-size_of(p));
}

void SwappedParameters::finish_oldest_io() {
  const size_t p = in_flight_.front();
  if (slots_[p].state == State::Reading) finish_read(p);
  else finish_write(p);
}

Tensor SwappedParameters::acquire(size_t p) {
  Slot& slot = slots_.at(p);
  if (size_of(p) == 0) return slot.data;
  switch (slot.state) {
    case State::Dirty:  // assigned since its last write: stored first, then read back
      begin_write(p);
      [[fallthrough]];
    case State::Writing:
      finish_write(p);
      [[fallthrough]];
    case State::Stored:
      need_room(p);
      begin_read(p);
      if (slot.state == State::Reading) finish_read(p);
      break;
    case State::Reading:
      finish_read(p);
      break;
    case State::Cached:
      out_of_cache(p);
      break;
    case State::Ahead:
    case State::InUse:
      break;
  }
  slot.state = State::InUse;
  ++slot.users;
  return slot.data;
}

void SwappedParameters::release(size_t p) {
  Slot& slot = slots_.at(p);
  if (size_of(p) == 0) return;
  FATHOM_CHECK(slot.state == State::InUse && slot.users > 0, "SwappedParameters: \"", pieces()[p].name,
               "\" released without being acquired");
  if (--slot.users == 0) to_cache(p);
}

bool SwappedParameters::prefetch(size_t p) {
  const Slot& slot = slots_.at(p);
  if (size_of(p) == 0 || slot.state != State::Stored || !slot.on_disk) return false;
  if (static_cast<int64_t>(in_flight_.size()) >= options_.buffer_count) return false;
  // Room for the largest piece stays free for whatever is asked for without notice.
  if (!make_room(size_of(p), largest_, false)) return false;
  begin_read(p);
  return true;
}

void SwappedParameters::settle() {
  for (size_t p = 0; p < slots_.size(); ++p) {
    if (slots_[p].state == State::Reading) finish_read(p);
    if (slots_[p].state == State::Ahead) to_cache(p);
  }
}

void SwappedParameters::check_module(const std::string& module, int64_t elements) const {
  FATHOM_CHECK(elements <= options_.max_in_cpu, "config error at ", kKey, ".max_in_cpu: ", options_.max_in_cpu,
               " elements cannot hold module \"", module, "\"'s part of this rank's shard (", elements,
               " elements), whose parameters are gathered together; set max_in_cpu to ", elements, " or more");
}

Tensor SwappedParameters::read(Range range) {
  Tensor out;
  {
    MemoryTagScope tag(MemoryTag::Other);
    out = Tensor::empty({range.size()}, dtype());
  }
  autograd::NoGradGuard no_grad;
  for (size_t p = 0; p < slots_.size(); ++p) {
    const Range piece = pieces()[p].range;
    const Range part{std::max(piece.begin, range.begin), std::min(piece.end, range.end)};
    if (part.size() == 0) continue;
    out.narrow(0, part.begin - range.begin, part.size())
        .copy_(acquire(p).narrow(0, part.begin - piece.begin, part.size()));
    release(p);
  }
  return out;
}

// Each piece the range touches is brought into memory (read first only when the range covers
// part of it), updated, and written once its last part is assigned: a piece that straddles two
// optimizer sub-groups is read and written once per step, not once per sub-group.
void SwappedParameters::assign(Range range, const Tensor& values) {
  FATHOM_CHECK(values.numel() == range.size(), "SwappedParameters: ", values.numel(), " values for ", range.size(),
               " elements");
  autograd::NoGradGuard no_grad;
  for (size_t p = 0; p < slots_.size(); ++p) {
    const Range piece = pieces()[p].range;
    const Range part{std::max(piece.begin, range.begin), std::min(piece.end, range.end)};
    if (part.size() == 0) continue;
    Slot& slot = slots_[p];
    FATHOM_CHECK(slot.state != State::InUse, "SwappedParameters: \"", pieces()[p].name,
                 "\" is assigned while an all-gather uses it");
    if (slot.state != State::Dirty) {
      if (part.size() == piece.size() && (slot.state == State::Stored || slot.state == State::Writing)) {
        if (slot.state == State::Writing) finish_write(p);
        need_room(p);
        slot.data.storage()->refill();  // every value is replaced: nothing to read
        track(size_of(p));
      } else {
        acquire(p);
        --slot.users;
      }
      slot.state = State::Dirty;
      slot.unassigned = size_of(p);
    }
    slot.data.narrow(0, part.begin - piece.begin, part.size()).copy_(values.narrow(0, part.begin - range.begin, part.size()));
    slot.unassigned -= part.size();
    if (slot.unassigned <= 0) begin_write(p);
  }
}

void SwappedParameters::begin_write(size_t p) {
  Slot& slot = slots_[p];
  while (static_cast<int64_t>(in_flight_.size()) >= options_.buffer_count) finish_oldest_io();
  swapper_->begin_swap_out(slot.group, {slot.data});
  slot.state = State::Writing;
  slot.on_disk = true;
  in_flight_.push_back(p);
}

void SwappedParameters::flush() {
  for (size_t p = 0; p < slots_.size(); ++p)
    if (slots_[p].state == State::Dirty) begin_write(p);  // its other values were read: the piece is whole
  while (!in_flight_.empty()) finish_oldest_io();
}

}  // namespace fathom::zero
