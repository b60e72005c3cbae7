#include "offload/io_faults.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

namespace fathom::offload {
namespace {

constexpr const char* kAcceptedForm =
    "a comma list of odirect, io_uring and enospc=BYTES, e.g. \"odirect,io_uring,enospc=1048576\"";

// The space budget is an atomic of its own: writes take from it on the I/O threads, where a
// lock per piece would serialize them.
struct State {
  std::once_flag from_environment;
  std::atomic<bool> refuse_direct_io{false};
  std::atomic<bool> refuse_io_uring{false};
  std::atomic<int64_t> space_left{-1};
};

void store(State& state, const IoFaults& faults) {
  state.refuse_direct_io.store(faults.refuse_direct_io);
  state.refuse_io_uring.store(faults.refuse_io_uring);
  state.space_left.store(faults.space_left < 0 ? -1 : faults.space_left);
}

State& raw_state() {
  static State s;
  return s;
}

// The environment is read on first use rather than at static initialization, so that a bad
// value surfaces as an error where I/O starts instead of before main(). A call that throws
// leaves the flag unset and the next call reports the error again.
State& state() {
  State& s = raw_state();
  std::call_once(s.from_environment, [&s] {
    const char* env = std::getenv("FATHOM_IO_FAULTS");
    if (env == nullptr) return;
    try {
      store(s, parse_io_faults(env));
    } catch (const Error& e) {
      FATHOM_FAIL("FATHOM_IO_FAULTS='", env, "': ", e.message());
    }
  });
  return s;
}

std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

}  // namespace

IoFaults parse_io_faults(const std::string& text) {
  IoFaults faults;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = trimmed(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    if (item == "odirect") {
      faults.refuse_direct_io = true;
    } else if (item == "io_uring") {
      faults.refuse_io_uring = true;
    } else if (item.rfind("enospc=", 0) == 0) {
      const std::string number = item.substr(7);
      char* end = nullptr;
      const long long bytes = number.empty() ? -1 : std::strtoll(number.c_str(), &end, 10);
      FATHOM_CHECK(bytes >= 0 && end != nullptr && *end == '\0', "bad fault '", item,
                   "': enospc takes a byte count >= 0; expected ", kAcceptedForm);
      faults.space_left = bytes;
    } else {
      FATHOM_FAIL("unknown fault '", item, "'; expected ", kAcceptedForm);
    }
  }
  return faults;
}

void set_io_faults(const IoFaults& faults) {
  State& s = raw_state();
  // An explicit setting wins: consume the once-flag without reading the environment, so that a
  // later first read cannot undo this call.
  std::call_once(s.from_environment, [] {});
  store(s, faults);
}

IoFaults io_faults() {
  State& s = state();
  return IoFaults{s.refuse_direct_io.load(), s.refuse_io_uring.load(), s.space_left.load()};
}

bool take_write_space(int64_t bytes) {
  std::atomic<int64_t>& left = state().space_left;
  int64_t now = left.load();
  while (true) {
    if (now < 0) return true;  // no limit
    if (now < bytes) return false;
    if (left.compare_exchange_weak(now, now - bytes)) return true;
  }
}

}  // namespace fathom::offload
