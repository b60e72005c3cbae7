#include "core/memory_stats.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace fathom {
namespace {
thread_local MemoryTag t_current_tag = MemoryTag::Other;
}

const char* memory_tag_name(MemoryTag tag) {
  switch (tag) {
    case MemoryTag::Parameters: return "parameters";
    case MemoryTag::Gradients: return "gradients";
    case MemoryTag::MasterWeights: return "master_weights";
    case MemoryTag::OptimizerState: return "optimizer_state";
    case MemoryTag::Activations: return "activations";
    case MemoryTag::Communication: return "communication";
    case MemoryTag::Other: return "other";
  }
  return "invalid";
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) bytes /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

MemoryTagScope::MemoryTagScope(MemoryTag tag) : previous_(t_current_tag) { t_current_tag = tag; }
MemoryTagScope::~MemoryTagScope() { t_current_tag = previous_; }
MemoryTag MemoryTagScope::current() { return t_current_tag; }

void MemoryStats::add(MemoryCounter& counter, int64_t bytes) {
  counter.current += bytes;
  FATHOM_CHECK(counter.current >= 0, "memory accounting went negative (", counter.current,
               " bytes): a block was freed twice or under another tag");
  counter.peak = std::max(counter.peak, counter.current);
}

void MemoryStats::on_allocate(MemoryTag tag, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  add(state_.by_tag[static_cast<int>(tag)], bytes);
  add(state_.total, bytes);
}

void MemoryStats::on_free(MemoryTag tag, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  add(state_.by_tag[static_cast<int>(tag)], -bytes);
  add(state_.total, -bytes);
}

void MemoryStats::on_retag(int64_t bytes, MemoryTag from, MemoryTag to) {
  if (from == to) return;
  std::lock_guard<std::mutex> lock(mutex_);
  add(state_.by_tag[static_cast<int>(from)], -bytes);
  add(state_.by_tag[static_cast<int>(to)], bytes);
}

void MemoryStats::on_reserve(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_.reserved += bytes;
  state_.peak_reserved = std::max(state_.peak_reserved, state_.reserved);
}

void MemoryStats::on_unreserve(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_.reserved -= bytes;
}

void MemoryStats::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (MemoryCounter& counter : state_.by_tag) counter.peak = counter.current;
  state_.total.peak = state_.total.current;
  state_.peak_reserved = state_.reserved;
}

MemorySnapshot MemoryStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

}  // namespace fathom
