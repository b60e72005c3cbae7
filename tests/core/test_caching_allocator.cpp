// The caching device allocator's bookkeeping, on the CPU: a fake device backend hands out host
// memory, counts calls, can run out of memory, and completes an event only when the test
// completes its stream (or the allocator waits for it).
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/cuda/caching_allocator.h"
#include "test_util.h"

using namespace fathom;
using cuda::CachingAllocator;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Stream handles are opaque to the allocator: any distinct values will do.
void* const kStreamA = reinterpret_cast<void*>(0x1000);
void* const kStreamB = reinterpret_cast<void*>(0x2000);
void* const kStreamC = reinterpret_cast<void*>(0x3000);

// The device's state, shared between the test and the backend the allocator owns.
struct FakeDevice {
  std::mutex mutex;
  size_t capacity = SIZE_MAX;
  size_t held = 0;
  std::unordered_map<void*, size_t> blocks;
  int64_t mallocs = 0, failed_mallocs = 0, frees = 0, memsets = 0, event_syncs = 0;
  struct Event {
    void* stream = nullptr;
    bool done = true;
  };
  std::vector<std::unique_ptr<Event>> events;
  int64_t live_events = 0;
  void* current_stream = nullptr;

  void complete(void* stream) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& event : events)
      if (event->stream == stream) event->done = true;
  }
  size_t held_bytes() {
    std::lock_guard<std::mutex> lock(mutex);
    return held;
  }
};

class FakeBackend final : public cuda::DeviceMemoryBackend {
 public:
  explicit FakeBackend(std::shared_ptr<FakeDevice> device) : device_(std::move(device)) {}

  void* malloc(size_t bytes) override {
    std::lock_guard<std::mutex> lock(device_->mutex);
    if (device_->held + bytes > device_->capacity) {
      ++device_->failed_mallocs;
      return nullptr;
    }
    void* ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (ptr == nullptr) std::abort();
    device_->blocks[ptr] = bytes;
    device_->held += bytes;
    ++device_->mallocs;
    return ptr;
  }
  void free(void* ptr) noexcept override {
    std::lock_guard<std::mutex> lock(device_->mutex);
    auto it = device_->blocks.find(ptr);
    if (it == device_->blocks.end()) std::abort();  // freeing what the device never gave out
    device_->held -= it->second;
    device_->blocks.erase(it);
    ++device_->frees;
    std::free(ptr);
  }
  void memset(void* ptr, int value, size_t bytes, void*) override {
    std::lock_guard<std::mutex> lock(device_->mutex);
    std::memset(ptr, value, bytes);
    ++device_->memsets;
  }
  void* create_event() override {
    std::lock_guard<std::mutex> lock(device_->mutex);
    device_->events.push_back(std::make_unique<FakeDevice::Event>());
    ++device_->live_events;
    return device_->events.back().get();
  }
  void destroy_event(void*) noexcept override {
    std::lock_guard<std::mutex> lock(device_->mutex);
    --device_->live_events;
  }
  void record_event(void* event, void* stream) override {
    std::lock_guard<std::mutex> lock(device_->mutex);
    auto* e = static_cast<FakeDevice::Event*>(event);
    e->stream = stream;
    e->done = false;
  }
  bool query_event(void* event) override {
    std::lock_guard<std::mutex> lock(device_->mutex);
    return static_cast<FakeDevice::Event*>(event)->done;
  }
  void synchronize_event(void* event) override {  // waiting is what completes the work
    std::lock_guard<std::mutex> lock(device_->mutex);
    static_cast<FakeDevice::Event*>(event)->done = true;
    ++device_->event_syncs;
  }
  void* current_stream() override {
    std::lock_guard<std::mutex> lock(device_->mutex);
    return device_->current_stream;
  }

 private:
  std::shared_ptr<FakeDevice> device_;
};

struct Fixture {
  std::shared_ptr<FakeDevice> device = std::make_shared<FakeDevice>();
  std::unique_ptr<CachingAllocator> allocator;
  explicit Fixture(bool poison = false)
      : allocator(std::make_unique<CachingAllocator>(0, std::make_unique<FakeBackend>(device), poison)) {}
  void* alloc(size_t bytes, void* stream, MemoryTag tag = MemoryTag::Other) {
    return allocator->allocate_on(bytes, tag, stream);
  }
  void free(void* ptr, size_t bytes, MemoryTag tag = MemoryTag::Other) { allocator->deallocate(ptr, bytes, tag); }
  MemorySnapshot snap() const { return allocator->stats().snapshot(); }
};

}  // namespace

TEST_CASE("caching allocator: size classes and bounded best fit", "[core]") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(600000) == kMiB);
  CHECK(CachingAllocator::round_size(kMiB) == kMiB);
  CHECK(CachingAllocator::round_size(kMiB + 1) == 2 * kMiB);
  CHECK(CachingAllocator::round_size(7 * kMiB / 2) == 4 * kMiB);
  CHECK(CachingAllocator::round_size(SIZE_MAX - 5) == SIZE_MAX - 5);  // no wrap-around to a tiny size
  CHECK(CachingAllocator::reusable(1024, 1024));
  CHECK_FALSE(CachingAllocator::reusable(2048, 1024));  // small classes: exact
  CHECK_FALSE(CachingAllocator::reusable(4 * kMiB, 5 * kMiB));
  CHECK(CachingAllocator::reusable(5 * kMiB, 4 * kMiB));  // within 5/4
  CHECK_FALSE(CachingAllocator::reusable(6 * kMiB, 4 * kMiB));

  Fixture f;
  void* big = f.alloc(8 * kMiB, kStreamA);
  void* mid = f.alloc(4 * kMiB, kStreamA);
  f.free(big, 8 * kMiB);
  f.free(mid, 4 * kMiB);
  CHECK(f.alloc(7 * kMiB / 2, kStreamA) == mid);  // the smallest block that fits
  void* fresh = f.alloc(5 * kMiB, kStreamA);      // 8 MiB would waste too much
  CHECK(fresh != big);
  CHECK(f.device->mallocs == 3);
  CHECK(f.alloc(7 * kMiB, kStreamA) == big);
}

TEST_CASE("caching allocator: a freed block is reused on its stream, never on another", "[core]") {
  Fixture f;
  void* p = f.alloc(1000, kStreamA);
  REQUIRE(p != nullptr);
  f.free(p, 1000);
  CHECK(f.alloc(900, kStreamA) == p);  // same 1 KiB class, same stream
  CHECK(f.device->mallocs == 1);
  f.free(p, 900);
  void* q = f.alloc(1000, kStreamB);
  CHECK(q != p);
  CHECK(f.device->mallocs == 2);
  void* r = f.alloc(1000, nullptr);  // the legacy default stream is a stream of its own
  CHECK(r != p);
  CHECK(r != q);
  CHECK(f.alloc(0, kStreamA) == nullptr);
  f.free(nullptr, 0);
  f.free(q, 1000);
  f.free(r, 1000);
  // allocate() uses the backend's current stream.
  f.device->current_stream = kStreamA;
  CHECK(f.allocator->allocate(1000, MemoryTag::Other) == p);
  f.free(p, 1000);
}

TEST_CASE("caching allocator: a block used on another stream waits for that stream's event", "[core]") {
  Fixture f;
  char* p = static_cast<char*>(f.alloc(4096, kStreamA));
  f.allocator->record_stream(p + 100, kStreamB);  // any address inside the block
  f.allocator->record_stream(p, kStreamB);        // twice: one event
  f.allocator->record_stream(p, kStreamA);        // its own stream: nothing to wait for
  f.free(p, 4096);
  CHECK(f.allocator->info().pending_bytes == 4096);
  CHECK(f.allocator->info().cached_bytes == 0);
  CHECK(f.device->live_events == 1);

  void* q = f.alloc(4096, kStreamA);  // B has not finished: p is not handed out
  CHECK(q != p);
  f.device->complete(kStreamB);
  void* again = f.alloc(4096, kStreamA);  // polled on allocation
  CHECK(again == p);
  CHECK(f.allocator->info().pending_bytes == 0);

  // Two other streams: free only once both have finished; the event is reused, not recreated.
  f.allocator->record_stream(p, kStreamB);
  f.allocator->record_stream(p, kStreamC);
  f.free(p, 4096);
  f.free(q, 4096);
  f.device->complete(kStreamC);
  CHECK(f.alloc(4096, kStreamA) == q);  // p still waits for B
  CHECK(f.allocator->info().pending_bytes == 4096);
  f.device->complete(kStreamB);
  CHECK(f.alloc(4096, kStreamA) == p);
  CHECK(f.device->live_events == 2);
  CHECK(f.device->mallocs == 2);
  f.free(q, 4096);
  // The block is handed back to the stream it belongs to, not to the one it was used on.
  f.free(p, 4096);
  void* on_b = f.alloc(4096, kStreamB);
  CHECK(on_b != p);
  f.free(on_b, 4096);

  std::ostringstream address;
  address << static_cast<void*>(p);
  CHECK(testing::error_of([&] { f.allocator->record_stream(p, kStreamB); }) ==
        "record_stream: " + address.str() + " is not inside a live allocation of cuda:0's allocator");
  int on_stack = 0;
  CHECK_THAT(testing::error_of([&] { f.allocator->record_stream(&on_stack, kStreamB); }),
             Catch::Contains("is not inside a live allocation of cuda:0's allocator"));
}

TEST_CASE("caching allocator: counters are exact per tag (requested bytes; reserved incl. cache)", "[core]") {
  Fixture f;
  void* w = f.alloc(1000, kStreamA, MemoryTag::Parameters);
  void* g = f.alloc(3 * kMiB + 5, kStreamA, MemoryTag::Gradients);
  MemorySnapshot s = f.snap();
  CHECK(s[MemoryTag::Parameters].current == 1000);
  CHECK(s[MemoryTag::Gradients].current == int64_t(3 * kMiB + 5));
  CHECK(s.total.current == int64_t(3 * kMiB + 1005));
  CHECK(s.reserved == int64_t(1024 + 4 * kMiB));
  f.free(g, 3 * kMiB + 5, MemoryTag::Gradients);
  s = f.snap();
  CHECK(s[MemoryTag::Gradients].current == 0);
  CHECK(s[MemoryTag::Gradients].peak == int64_t(3 * kMiB + 5));
  CHECK(s.reserved == int64_t(1024 + 4 * kMiB));  // cached, still held from the device
  CHECK(f.allocator->info().cached_bytes == 4 * kMiB);
  void* a = f.alloc(3 * kMiB + 1000, kStreamA, MemoryTag::Activations);  // g's block: same class
  CHECK(a == g);
  s = f.snap();
  CHECK(s[MemoryTag::Activations].current == int64_t(3 * kMiB + 1000));
  CHECK(s.reserved == int64_t(1024 + 4 * kMiB));
  CHECK(s.peak_reserved == int64_t(1024 + 4 * kMiB));
  f.allocator->retag(1000, MemoryTag::Parameters, MemoryTag::Gradients);
  f.free(w, 1000, MemoryTag::Gradients);
  f.free(a, 3 * kMiB + 1000, MemoryTag::Activations);
  s = f.snap();
  CHECK(s.total.current == 0);
  CHECK(s.total.peak == int64_t(3 * kMiB + 2000));
  f.allocator->empty_cache();
  CHECK(f.snap().reserved == 0);
  CHECK(f.device->held_bytes() == 0);

  // Misuse is an error naming the block, before any counter moves.
  void* x = f.alloc(100, kStreamA);
  CHECK_THAT(testing::error_of([&] { f.free(x, 99); }), Catch::Contains("as 99 bytes, but it was allocated as 100"));
  f.free(x, 100);
  CHECK_THAT(testing::error_of([&] { f.free(x, 100); }), Catch::Contains("not a live allocation"));
  CHECK(f.snap().total.current == 0);
}

TEST_CASE("caching allocator: empty_cache returns free blocks, not live or pending ones", "[core]") {
  Fixture f;
  void* live = f.alloc(2 * kMiB, kStreamA);
  void* pending = f.alloc(kMiB, kStreamA);
  void* cached_a = f.alloc(512, kStreamA);
  void* cached_b = f.alloc(3 * kMiB, kStreamB);
  f.allocator->record_stream(pending, kStreamB);
  f.free(pending, kMiB);
  f.free(cached_a, 512);
  f.free(cached_b, 3 * kMiB);
  CHECK(f.snap().reserved == int64_t(6 * kMiB + 512));
  f.allocator->empty_cache();
  CHECK(f.device->frees == 2);
  CHECK(f.snap().reserved == int64_t(3 * kMiB));  // live + pending
  CHECK(f.device->held_bytes() == 3 * kMiB);
  CHECK(f.allocator->info().pending_bytes == kMiB);
  CHECK(f.device->event_syncs == 0);  // empty_cache polls, it does not wait
  f.device->complete(kStreamB);
  f.allocator->empty_cache();  // the pending block finished: now it goes too
  CHECK(f.snap().reserved == int64_t(2 * kMiB));
  CHECK(f.device->held_bytes() == 2 * kMiB);
  f.free(live, 2 * kMiB);
  f.allocator.reset();  // the destructor returns the rest
  CHECK(f.device->held_bytes() == 0);
  CHECK(f.device->live_events == 0);
}

TEST_CASE("caching allocator: out of memory returns the cache, retries once, then names a fix", "[core]") {
  Fixture f;
  f.device->capacity = 4 * kMiB;
  void* a = f.alloc(2 * kMiB, kStreamA);
  void* p = f.alloc(kMiB, kStreamA);
  f.free(a, 2 * kMiB);                      // cached on A
  f.allocator->record_stream(p, kStreamB);  // pending on B
  f.free(p, kMiB);
  // 3 MiB on stream C: the device holds 3 of 4 MiB, all of it cache; the first try fails, the
  // allocator waits for B, returns both blocks and succeeds.
  void* c = f.alloc(3 * kMiB, kStreamC, MemoryTag::Activations);
  REQUIRE(c != nullptr);
  CHECK(f.device->failed_mallocs == 1);
  CHECK(f.device->event_syncs == 1);
  CHECK(f.snap().reserved == int64_t(3 * kMiB));
  CHECK(f.allocator->info().cached_bytes == 0);

  const std::string message = testing::error_of([&] { f.alloc(2 * kMiB, kStreamC, MemoryTag::Activations); });
  CHECK(f.device->failed_mallocs == 3);  // the try and the one retry
  CHECK_THAT(message, Catch::StartsWith("out of memory on cuda:0 allocating 2.0 MiB (2097152 bytes) for activations "
                                        "(3.0 MiB in use, 3.0 MiB reserved/cached"));
  CHECK_THAT(message, Catch::Contains("in use: activations 3.0 MiB"));
  CHECK_THAT(message, Catch::Contains("smaller micro batch") && Catch::Contains("ZeRO stage") &&
                          Catch::Contains("activation checkpointing"));
  // Nothing leaked or miscounted by the failure.
  CHECK(f.snap().total.current == int64_t(3 * kMiB));
  f.free(c, 3 * kMiB, MemoryTag::Activations);
  CHECK(f.alloc(3 * kMiB, kStreamC) == c);
  f.free(c, 3 * kMiB);
}

TEST_CASE("caching allocator: poison fills every allocation with 0xFF, new or reused", "[core]") {
  Fixture f(/*poison=*/true);
  CHECK(f.allocator->poison());
  auto all_ff = [](const void* ptr, size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(ptr);
    for (size_t i = 0; i < n; ++i)
      if (bytes[i] != 0xFF) return false;
    return true;
  };
  void* p = f.alloc(777, kStreamA);
  CHECK(all_ff(p, 777));
  float nan_check;
  std::memcpy(&nan_check, p, sizeof nan_check);
  CHECK(std::isnan(nan_check));
  std::memset(p, 0, 777);
  f.free(p, 777);
  void* q = f.alloc(700, kStreamA);
  REQUIRE(q == p);
  CHECK(all_ff(q, 700));
  f.free(q, 700);
  f.allocator->set_poison(false);
  const int64_t memsets = f.device->memsets;
  f.free(f.alloc(700, kStreamA), 700);
  CHECK(f.device->memsets == memsets);

  // FATHOM_CUDA_POISON, read when a device's allocator is created.
  const char* saved = std::getenv("FATHOM_CUDA_POISON");
  const std::string saved_value = saved ? saved : "";
  unsetenv("FATHOM_CUDA_POISON");
  CHECK_FALSE(CachingAllocator::poison_from_environment());
  setenv("FATHOM_CUDA_POISON", "1", 1);
  CHECK(CachingAllocator::poison_from_environment());
  setenv("FATHOM_CUDA_POISON", "0", 1);
  CHECK_FALSE(CachingAllocator::poison_from_environment());
  setenv("FATHOM_CUDA_POISON", "yes", 1);
  CHECK(testing::error_of([] { CachingAllocator::poison_from_environment(); }) ==
        "FATHOM_CUDA_POISON=\"yes\": expected 1 (fill every device allocation with 0xFF bytes) or 0 (off)");
  if (saved) setenv("FATHOM_CUDA_POISON", saved_value.c_str(), 1);
  else unsetenv("FATHOM_CUDA_POISON");
}

TEST_CASE("caching allocator: a repeated pattern stops reaching the device after warm-up", "[core]") {
  Fixture f;
  const size_t sizes[] = {64, 1000, 4096, 100000, 3 * kMiB + 7, 24 * kMiB, 512};
  auto step = [&](int k) {
    // A forward/backward-like step: nested lifetimes, a side-stream buffer, frees out of order.
    std::vector<void*> live;
    for (size_t s : sizes) live.push_back(f.alloc(s + k % 3, kStreamA, MemoryTag::Activations));
    void* comm = f.alloc(8 * kMiB, kStreamB, MemoryTag::Communication);
    f.allocator->record_stream(live[4], kStreamB);
    for (size_t i = live.size(); i-- > 0;) f.free(live[i], sizes[i] + k % 3, MemoryTag::Activations);
    f.free(comm, 8 * kMiB, MemoryTag::Communication);
    f.device->complete(kStreamB);  // the side stream finishes its reduction
  };
  for (int k = 0; k < 3; ++k) step(k);
  const int64_t warmed = f.device->mallocs;
  const int64_t reserved = f.snap().reserved;
  for (int k = 0; k < 200; ++k) step(k);
  CHECK(f.device->mallocs == warmed);
  CHECK(f.device->frees == 0);
  CHECK(f.snap().reserved == reserved);
  CHECK(f.snap().total.current == 0);
}

TEST_CASE("caching allocator: two threads allocating and freeing concurrently", "[core]") {
  Fixture f;
  constexpr int kIterations = 3000;
  std::atomic<int> collisions{0};
  auto worker = [&](unsigned char mark, void* own_stream) {
    uint64_t state = mark;
    for (int i = 0; i < kIterations; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const size_t bytes = 1 + (state >> 33) % (i % 7 == 0 ? 3 * kMiB : 9000);
      void* stream = (state >> 20) & 1 ? own_stream : nullptr;  // the default stream is shared
      auto* p = static_cast<unsigned char*>(f.alloc(bytes, stream, MemoryTag::Activations));
      std::memset(p, mark, bytes);
      std::this_thread::yield();
      // No other thread got the same block meanwhile.
      for (size_t j = 0; j < bytes; j += 97)
        if (p[j] != mark) ++collisions;
      if (p[bytes - 1] != mark) ++collisions;
      f.free(p, bytes, MemoryTag::Activations);
    }
  };
  std::thread one(worker, 0x11, kStreamA);
  std::thread two(worker, 0x22, kStreamB);
  one.join();
  two.join();
  CHECK(collisions == 0);
  CHECK(f.snap().total.current == 0);
  CHECK(f.allocator->info().live_blocks == 0);
  CHECK(static_cast<size_t>(f.snap().reserved) == f.device->held_bytes());
  f.allocator->empty_cache();
  CHECK(f.device->held_bytes() == 0);
  CHECK(f.snap().reserved == 0);
}
