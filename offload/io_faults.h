#pragma once
// Fault injection for the offload I/O path, so that tests run the error paths a healthy disk
// never takes: a file system without O_DIRECT, a container that forbids io_uring, a full disk.
//
// The initial value comes once from FATHOM_IO_FAULTS, a comma list of
//   odirect          DirectFile's open fails as it does on a file system without O_DIRECT
//   io_uring         io_uring setup fails as it does under Docker's seccomp profile
//   enospc=BYTES     writes succeed until BYTES are written, then fail with ENOSPC
// e.g. FATHOM_IO_FAULTS=io_uring,enospc=1048576; set_io_faults() replaces it.

#include <cstdint>
#include <string>

namespace fathom::offload {

struct IoFaults {
  bool refuse_direct_io = false;  // DirectFile open fails as EINVAL would
  bool refuse_io_uring = false;   // io_uring setup fails as EPERM would (Docker's seccomp, kernel.io_uring_disabled)
  int64_t space_left = -1;        // bytes that can still be written before every write fails with ENOSPC; -1: no limit
};

// Thread-safe. io_faults().space_left is the budget left now, not the one set.
void set_io_faults(const IoFaults& faults);
IoFaults io_faults();
// Parses FATHOM_IO_FAULTS's form; throws naming the accepted form.
IoFaults parse_io_faults(const std::string& text);

// The injection point before each write submission: takes `bytes` from the budget and returns
// true, or returns false when the budget cannot cover them (the write must fail with ENOSPC).
bool take_write_space(int64_t bytes);

}  // namespace fathom::offload
