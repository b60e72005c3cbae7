#include "core/simt/block_scheduler.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/simt/shared_memory_checker.h"

namespace fathom::simt {
namespace {
thread_local BlockScheduler* running_block = nullptr;

const char* kind_name(BlockScheduler::WarpKind kind) {
  switch (kind) {
    case BlockScheduler::WarpKind::Sync: return "__syncwarp";
    case BlockScheduler::WarpKind::Ballot: return "__ballot_sync";
    case BlockScheduler::WarpKind::Index: return "__shfl_sync";
    case BlockScheduler::WarpKind::Up: return "__shfl_up_sync";
    case BlockScheduler::WarpKind::Down: return "__shfl_down_sync";
    case BlockScheduler::WarpKind::Xor: return "__shfl_xor_sync";
  }
  return "?";
}

std::string hex(unsigned mask) {
  std::ostringstream out;
  out << "0x" << std::hex << mask;
  return out.str();
}

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

std::string dim_str(const Dim3& d) {
  std::ostringstream out;  // (operator+ on temporaries trips GCC 12's -Wrestrict)
  out << "(" << d.x << ", " << d.y << ", " << d.z << ")";
  return out.str();
}

std::string site_str(const Site& s) { return std::string(::fathom::detail::source_path(s.file)) + ":" + std::to_string(s.line); }

Schedule Schedule::from_environment() {
  const char* text = std::getenv("FATHOM_SIMT_ORDER");
  Schedule s;
  if (!text || !*text || std::string(text) == "forward") return s;
  const std::string value(text);
  if (value == "reverse") {
    s.order = Order::Reverse;
    return s;
  }
  if (value.rfind("random:", 0) == 0) {
    char* end = nullptr;
    s.seed = std::strtoull(value.c_str() + 7, &end, 10);
    if (end && *end == '\0' && value.size() > 7) {
      s.order = Order::Random;
      return s;
    }
  }
  FATHOM_FAIL("FATHOM_SIMT_ORDER is \"", value, "\"; use forward, reverse or random:<seed> (e.g. random:7)");
}

std::string Schedule::str() const {
  switch (order) {
    case Order::Forward: return "forward";
    case Order::Reverse: return "reverse";
    case Order::Random: return "random:" + std::to_string(seed);
  }
  return "?";
}

BlockScheduler::BlockScheduler(const char* kernel, Dim3 grid_dim, Dim3 block_idx, Dim3 block_dim, Schedule schedule,
                               std::vector<FiberStack*> stacks)
    : kernel_(kernel),
      schedule_(schedule),
      random_state_(schedule.seed ^ (uint64_t{block_idx.x} << 20) ^ (uint64_t{block_idx.y} << 40) ^ block_idx.z),
      stacks_(std::move(stacks)) {
  const int n = static_cast<int>(block_dim.count());
  FATHOM_CHECK(static_cast<int>(stacks_.size()) >= n, "SIMT emulator: ", n, " threads but ", stacks_.size(), " stacks");
  threads_.resize(n);
  lanes_.resize(n);
  fibers_ = std::vector<Fiber>(n);
  for (int t = 0; t < n; ++t) {
    ThreadContext& c = threads_[t];
    c.thread_idx = Dim3(t % block_dim.x, t / block_dim.x % block_dim.y, t / (block_dim.x * block_dim.y));
    c.block_idx = block_idx;
    c.block_dim = block_dim;
    c.grid_dim = grid_dim;
    c.linear = t;
    c.lane = t % kWarpSize;
    c.warp = t / kWarpSize;
  }
}

constinit thread_local const ThreadContext* BlockScheduler::running_thread = nullptr;

BlockScheduler& BlockScheduler::current() {
  if (running_block == nullptr || Fiber::current() == nullptr) fail_outside_kernel();
  return *running_block;
}

void BlockScheduler::fail_outside_kernel() {
  FATHOM_FAIL("SIMT emulator: a device function was called outside a kernel launch");
}

std::string BlockScheduler::who(int t) const {
  return "thread " + dim_str(threads_[t].thread_idx) + " of block " + dim_str(threads_[t].block_idx) + " of kernel " +
         kernel_;
}

std::vector<int> BlockScheduler::resume_order() {
  std::vector<int> order(threads_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  if (schedule_.order == Order::Reverse) std::reverse(order.begin(), order.end());
  if (schedule_.order == Order::Random)
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[splitmix(random_state_) % i]);
  return order;
}

void BlockScheduler::run(const std::function<void()>& body) {
  for (size_t t = 0; t < fibers_.size(); ++t) fibers_[t].start(*stacks_[t], body);
  SharedMemoryChecker& checker = shared_memory_checker();
  checker.begin_block(static_cast<int>(threads_.size()));
  BlockScheduler* outer = std::exchange(running_block, this);
  struct Restore {
    BlockScheduler* outer;
    SharedMemoryChecker& checker;
    ~Restore() {
      running_block = outer;
      checker.end_block();
    }
  } restore{outer, checker};
  while (true) {
    for (int t : resume_order()) {
      if (lanes_[t].state != State::Ready) continue;
      running_ = t;
      running_thread = &threads_[t];
      checker.set_running(t);
      try {
        fibers_[t].resume();
      } catch (const Error& e) {
        running_thread = nullptr;
        FATHOM_FAIL(who(t), ": ", e.what());
      }
      running_thread = nullptr;
      if (checker.race()) FATHOM_FAIL(race_message(*checker.race()));
      running_ = -1;
      if (fibers_[t].done()) lanes_[t].state = State::Done;
    }
    if (std::all_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.state == State::Done; })) return;
    if (release_warps() || release_barrier()) continue;
    fail_stuck();
  }
}

void BlockScheduler::syncthreads(Site site) {
  Lane& lane = lanes_[running_];
  lane.state = State::Barrier;
  lane.site = site;
  Fiber::yield();
}

BlockScheduler::WarpResult BlockScheduler::warp_op(WarpKind kind, unsigned mask, const void* value, size_t size,
                                                   int arg, int width, Site site) {
  const int t = running_;
  FATHOM_CHECK(width >= 1 && width <= kWarpSize && (width & (width - 1)) == 0, kind_name(kind), " at ",
               site_str(site), ": width ", width, " must be a power of two from 1 to 32");
  FATHOM_CHECK(mask >> threads_[t].lane & 1u, kind_name(kind), " at ", site_str(site), ": its mask ", hex(mask),
               " does not include the calling lane ", threads_[t].lane);
  Lane& lane = lanes_[t];
  lane.state = State::Warp;
  lane.kind = kind;
  lane.mask = mask;
  lane.arg = arg;
  lane.width = width;
  lane.site = site;
  lane.size = size;
  if (size) std::memcpy(lane.value, value, size);
  Fiber::yield();
  return lane.result;
}

unsigned BlockScheduler::active_mask() const {
  const int warp = threads_[running_].warp;
  unsigned mask = 0;
  for (size_t t = static_cast<size_t>(warp) * kWarpSize; t < threads_.size() && t < size_t(warp + 1) * kWarpSize; ++t)
    if (lanes_[t].state != State::Done) mask |= 1u << threads_[t].lane;
  return mask;
}

std::string BlockScheduler::lane_place(int t) const {
  const Lane& l = lanes_[t];
  switch (l.state) {
    case State::Done: return "has exited";
    case State::Barrier: return "waits at the __syncthreads at " + site_str(l.site);
    case State::Warp: return std::string("waits at the ") + kind_name(l.kind) + " at " + site_str(l.site) + " (mask " +
                             hex(l.mask) + ")";
    case State::Ready: return "is running";
  }
  return "?";
}

// Completes every warp operation whose whole mask has arrived; an operation that can never
// complete is an error.
bool BlockScheduler::release_warps() {
  bool released = false;
  const int n = static_cast<int>(threads_.size());
  for (int t = 0; t < n; ++t) {
    const Lane& me = lanes_[t];
    if (me.state != State::Warp) continue;
    const int base = threads_[t].warp * kWarpSize;
    std::vector<int> group;
    for (int k = 0; k < kWarpSize; ++k) {
      if (!(me.mask >> k & 1u)) continue;
      const int other = base + k;
      // (The message is built only on failure: this loop runs for every lane of every warp operation.)
      const auto op = [&] {
        return std::string(kind_name(me.kind)) + " at " + site_str(me.site) + " (mask " + hex(me.mask) + ") in " +
               who(t);
      };
      if (other >= n)
        FATHOM_FAIL(op(), ": the mask names lane ", k, ", which this block does not have (", n, " threads)");
      const Lane& l = lanes_[other];
      if (l.state != State::Warp || l.kind != me.kind || l.mask != me.mask)
        FATHOM_FAIL(op(), " cannot complete: lane ", k, " ", lane_place(other));
      group.push_back(other);
    }
    // Every lane of the mask is here: each lane's result from its source.
    for (int k : group) {
      Lane& l = lanes_[k];
      const int lane = threads_[k].lane, segment = lane & ~(l.width - 1);
      int source = lane;
      switch (l.kind) {
        case WarpKind::Sync: break;
        case WarpKind::Ballot: {
          unsigned bits = 0;
          for (int j : group) bits |= (lanes_[j].value[0] ? 1u : 0u) << threads_[j].lane;
          std::memcpy(l.result.bytes, &bits, sizeof bits);
          break;
        }
        case WarpKind::Index: source = segment + (l.arg & (l.width - 1)); break;
        case WarpKind::Up: source = (lane - segment) >= l.arg ? lane - l.arg : lane; break;
        case WarpKind::Down: source = (lane - segment) + l.arg < l.width ? lane + l.arg : lane; break;
        case WarpKind::Xor: {
          const int x = lane ^ l.arg;
          source = x >= segment + l.width ? lane : x;
          break;
        }
      }
      if (l.kind == WarpKind::Sync || l.kind == WarpKind::Ballot) continue;
      FATHOM_CHECK(source >= 0 && source < kWarpSize && (l.mask >> source & 1u), kind_name(l.kind), " at ",
                   site_str(l.site), " in ", who(k), " reads lane ", source, ", which is not in its mask ", hex(l.mask));
      std::memcpy(l.result.bytes, lanes_[base + source].value, l.size);
    }
    for (int k : group) lanes_[k].state = State::Ready;
    if (me.kind == WarpKind::Sync) shared_memory_checker().warp_synced(threads_[t].warp);
    released = true;
  }
  return released;
}

// Releases the barrier when every thread that has not exited waits at the same one.
bool BlockScheduler::release_barrier() {
  int first = -1;
  for (int t = 0; t < static_cast<int>(lanes_.size()); ++t)
    if (lanes_[t].state == State::Barrier) {
      first = t;
      break;
    }
  if (first < 0) return false;
  const Site site = lanes_[first].site;
  for (int t = 0; t < static_cast<int>(lanes_.size()); ++t) {
    const Lane& l = lanes_[t];
    const bool same = l.state == State::Barrier && l.site.line == site.line && std::strcmp(l.site.file, site.file) == 0;
    FATHOM_CHECK(same, "the __syncthreads at ", site_str(site), " cannot complete: ", who(first), " waits there but ",
                 who(t), " ", lane_place(t), " (a barrier must be reached by every thread of the block)");
  }
  for (Lane& l : lanes_) l.state = State::Ready;
  shared_memory_checker().barrier_completed();
  last_barrier_ = site;
  return true;
}

namespace {
const char* access_verb(Access a, bool past) {
  switch (a) {
    case Access::Read: return past ? "read" : "reads";
    case Access::Write: return past ? "wrote" : "writes";
    case Access::Atomic: return past ? "updated atomically" : "atomically updates";
  }
  return "?";
}

// " (at function file:line)" where a sanitizer runtime can symbolise the access, else its address.
extern "C" void __sanitizer_symbolize_pc(void* pc, const char* format, char* out, size_t size) __attribute__((weak));
std::string access_place(const void* pc) {
  if (!pc) return "";
  if (__sanitizer_symbolize_pc) {
    void* call = static_cast<char*>(const_cast<void*>(pc)) - 1;  // pc: the return address of the hook
    char function[256] = {}, place[256] = {};
    __sanitizer_symbolize_pc(call, "%f", function, sizeof function);
    __sanitizer_symbolize_pc(call, "%s:%l", place, sizeof place);
    const bool has_line = place[0] && std::strstr(place, "<null>") == nullptr;
    if (function[0]) return std::string(" (in ") + function + (has_line ? std::string(" at ") + place : "") + ")";
  }
  std::ostringstream out;
  out << " (at pc " << pc << ")";
  return out.str();
}
}  // namespace

std::string BlockScheduler::race_message(const SharedRace& race) const {
  std::ostringstream out;
  out << who(race.thread) << " " << access_verb(race.access, false) << " " << race.bytes << (race.bytes == 1 ? " byte" : " bytes") << " at offset "
      << race.offset << " of the block's " << (race.dynamic ? "dynamic shared memory" : "__shared__ variables")
      << access_place(race.pc);
  if (race.uninitialised) {
    out << " that no thread of the block has written: shared memory starts undefined in every block (write it "
           "before reading it)";
    return "uninitialised shared memory: " + out.str();
  }
  const std::string since =
      last_barrier_.file ? "the __syncthreads at " + site_str(last_barrier_) : std::string("the block began");
  out << ", which " << (race.other >= 0 ? "thread " + dim_str(threads_[race.other].thread_idx) : "several threads")
      << " " << access_verb(race.other_access, true) << " with no barrier between them (since " << since
      << "): a shared-memory race; separate the accesses with __syncthreads (or __syncwarp within one warp)";
  return "shared-memory race: " + out.str();
}

void BlockScheduler::fail_stuck() {
  std::string places;
  for (int t = 0; t < static_cast<int>(lanes_.size()) && places.size() < 2000; ++t)
    if (lanes_[t].state != State::Done) places += "\n  " + who(t) + " " + lane_place(t);
  FATHOM_FAIL("SIMT emulator: the block cannot go on:", places);
}

}  // namespace fathom::simt
