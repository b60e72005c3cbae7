#pragma once
// Tagged memory accounting. Every allocation is charged to a tag (what the bytes are for);
// ZeRO and offload are judged by these counters, so they are exact byte counts of what
// the allocator handed out, not estimates.

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace fathom {

enum class MemoryTag : uint8_t {
  Parameters,
  Gradients,
  MasterWeights,   // fp32 copies of 16-bit parameters (mixed precision)
  OptimizerState,  // the optimizer's own states (Adam's moments, ...)
  Activations,
  Communication,
  Other,
};
inline constexpr int kNumMemoryTags = 7;
const char* memory_tag_name(MemoryTag tag);
// "0 B", "16.0 KiB", "1.5 GiB": bytes for people.
std::string format_bytes(double bytes);

// The tag charged by allocations made on this thread while the scope is alive:
//   { MemoryTagScope scope(MemoryTag::Gradients); auto g = Tensor::zeros(...); }
class MemoryTagScope {
 public:
  explicit MemoryTagScope(MemoryTag tag);
  ~MemoryTagScope();
  MemoryTagScope(const MemoryTagScope&) = delete;
  MemoryTagScope& operator=(const MemoryTagScope&) = delete;
  static MemoryTag current();  // MemoryTag::Other outside any scope

 private:
  MemoryTag previous_;
};

struct MemoryCounter {
  int64_t current = 0;
  int64_t peak = 0;
};

struct MemorySnapshot {
  std::array<MemoryCounter, kNumMemoryTags> by_tag{};
  MemoryCounter total;       // peak of the sum, not the sum of the peaks
  int64_t reserved = 0;      // bytes held from the system (>= total.current with a caching allocator)
  int64_t peak_reserved = 0;
  const MemoryCounter& operator[](MemoryTag tag) const { return by_tag[static_cast<int>(tag)]; }
};

// Thread-safe counters of one allocator.
class MemoryStats {
 public:
  void on_allocate(MemoryTag tag, int64_t bytes);
  void on_free(MemoryTag tag, int64_t bytes);
  void on_retag(int64_t bytes, MemoryTag from, MemoryTag to);
  void on_reserve(int64_t bytes);
  void on_unreserve(int64_t bytes);
  // Peaks restart from the current values.
  void reset_peak();
  MemorySnapshot snapshot() const;

 private:
  static void add(MemoryCounter& counter, int64_t bytes);
  mutable std::mutex mutex_;
  MemorySnapshot state_;
};

}  // namespace fathom
