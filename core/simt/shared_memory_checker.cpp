#include "core/simt/shared_memory_checker.h"

#include <algorithm>

namespace fathom::simt {

constinit thread_local SharedMemoryChecker* active_shared_memory_checker = nullptr;

SharedMemoryChecker& shared_memory_checker() {
  static thread_local SharedMemoryChecker checker;
  return checker;
}

void SharedMemoryChecker::Region::watch(void* start, size_t size) {
  begin = reinterpret_cast<uintptr_t>(start);
  bytes = start ? size : 0;
  // Grown cells start as never written; shrinking would only cost the next larger launch.
  const size_t word_count = (bytes + 3) / 4;
  if (words.size() < word_count) {
    words.resize(word_count);
    split.resize(word_count);
    bytes_.resize(word_count * 4);
  }
}

void SharedMemoryChecker::Region::clear() {
  std::fill(words.begin(), words.end(), Cell{});
  std::fill(split.begin(), split.end(), 0);
  std::fill(bytes_.begin(), bytes_.end(), Cell{});
}

void SharedMemoryChecker::watch(void* static_begin, size_t static_bytes, void* dynamic_begin, size_t dynamic_bytes) {
  static_.watch(static_begin, static_bytes);
  dynamic_.watch(dynamic_begin, dynamic_bytes);
}

void SharedMemoryChecker::begin_block(int threads) {
  // Long before the counter wraps, start the shadow afresh (between blocks, so nothing is lost).
  if (epoch_ > 0xF0000000u) {
    static_.clear();
    dynamic_.clear();
    epoch_ = 0;
  }
  advance_epoch();
  block_start_ = epoch_;
  warp_syncs_.assign((threads + 31) / 32, 0);
  running_ = 0;
  race_.reset();
  active_shared_memory_checker = this;
}

void SharedMemoryChecker::end_block() { active_shared_memory_checker = nullptr; }

void SharedMemoryChecker::advance_epoch() { ++epoch_; }

bool SharedMemoryChecker::ordered(int other_warp, uint16_t sync_then) const {
  const int warp = running_ / 32;
  return other_warp == warp && warp_syncs_[warp] != sync_then;
}

namespace {
// The warp of the thread a shadow cell's field (thread + 1) names.
int warp_of_thread(uint16_t field) { return (field - 1) / 32; }
}  // namespace

std::optional<SharedRace> SharedMemoryChecker::check(Cell& cell, Access kind) {
  const uint16_t me = static_cast<uint16_t>(running_ + 1);
  const uint16_t warp = static_cast<uint16_t>(running_ / 32);
  const auto race = [&](Access other_access, int other) {
    SharedRace r;
    r.access = kind;
    r.other_access = other_access;
    r.thread = running_;
    r.other = other;
    return r;
  };
  if (kind != Access::Write && cell.write_epoch < block_start_) {
    SharedRace r = race(Access::Write, -1);
    r.uninitialised = true;
    return r;
  }
  // Against the last write of this epoch (an atomic meets atomics freely, and a thread itself).
  if (cell.write_epoch == epoch_ && cell.writer != me && cell.writer != (kAtomicBit | me)) {
    const bool atomic_writer = cell.writer & kAtomicBit;
    if (!(kind == Access::Atomic && atomic_writer)) {
      const int writer = cell.writer == kSeveral ? -1 : (cell.writer & ~kAtomicBit) - 1;
      if (!(writer >= 0 && ordered(writer / 32, cell.write_sync)))
        return race(atomic_writer ? Access::Atomic : Access::Write, writer);
    }
  }
  // A write against the reads of this epoch.
  if (kind != Access::Read && cell.read_epoch == epoch_ && cell.reader != me) {
    const bool one_reader = cell.reader < kWarpReaders;
    const int readers_warp = one_reader                ? warp_of_thread(cell.reader)
                             : cell.reader == kSeveral ? -1
                                                       : cell.reader & ~kWarpReaders;
    if (!(readers_warp >= 0 && ordered(readers_warp, cell.read_sync)))
      return race(Access::Read, one_reader ? cell.reader - 1 : -1);
  }
  const uint16_t sync = warp_syncs_[warp];
  switch (kind) {
    case Access::Read:
      if (cell.read_epoch != epoch_)
        cell.reader = me;
      else if (cell.reader != me)
        cell.reader =
            (cell.reader < kWarpReaders ? warp_of_thread(cell.reader) == warp : cell.reader == (kWarpReaders | warp))
                ? static_cast<uint16_t>(kWarpReaders | warp)
                : kSeveral;
      cell.read_epoch = epoch_;
      cell.read_sync = sync;
      break;
    case Access::Write:
      cell.writer = me;
      cell.write_epoch = epoch_;
      cell.write_sync = sync;
      break;
    case Access::Atomic:
      cell.writer = cell.write_epoch == epoch_ && (cell.writer & kAtomicBit) && cell.writer != (kAtomicBit | me)
                        ? kSeveral
                        : static_cast<uint16_t>(kAtomicBit | me);
      cell.write_epoch = epoch_;
      cell.write_sync = sync;
      break;
  }
  return std::nullopt;
}

bool SharedMemoryChecker::check_word(Region& region, size_t offset, size_t end, Access kind) {
  const size_t word = offset / 4;
  std::optional<SharedRace> race;
  if (!region.split[word] && offset % 4 == 0 && end == offset + 4) {
    race = check(region.words[word], kind);
  } else {
    if (!region.split[word]) {  // its bytes start with the word's history
      std::fill_n(region.bytes_.begin() + static_cast<std::ptrdiff_t>(word * 4), 4, region.words[word]);
      region.split[word] = 1;
    }
    for (size_t i = offset; i < end && !race; ++i) race = check(region.bytes_[i], kind);
  }
  if (race) race_ = race;
  return race.has_value();
}

void SharedMemoryChecker::access(const void* address, size_t bytes, Access kind, const void* pc) {
  if (race_) return;  // the block stops at its first race
  ++accesses_checked_;
  const bool dynamic = !static_.contains(address);
  Region& region = dynamic ? dynamic_ : static_;
  const size_t offset = reinterpret_cast<uintptr_t>(address) - region.begin;
  // An access running past the end of shared memory: the bytes inside it are checked here.
  const size_t end = std::min(offset + bytes, region.bytes);
  for (size_t at = offset; at < end; at = (at / 4 + 1) * 4)
    if (check_word(region, at, std::min(end, (at / 4 + 1) * 4), kind)) {
      race_->dynamic = dynamic;
      race_->offset = offset;
      race_->bytes = bytes;
      race_->pc = pc;
      return;
    }
}

}  // namespace fathom::simt
