#pragma once
// TensorSwapper: moves groups of host-tier tensors to swap files and back (NVMe offload).
//
// A group (one optimizer sub-group: its fp32 master and the optimizer's states) is written to
// one SwapFile (offload/swap_file.h: checksummed, so a half-written or damaged file is never read
// back as state) and its memory released; swapped in, the memory is refilled and read back. Each
// direction is split in begin/finish so that the caller overlaps the I/O with its own work: the
// optimizer updates sub-group k while k+1 is read and k-1 written.
//
// The tensors must be contiguous, start their storage and live in the host tier
// (offload/host_memory.h), whose page-aligned, page-padded blocks are valid O_DIRECT buffers:
// misaligned I/O cannot be expressed. Files live in `directory` (created, and removed with the
// files when the swapper goes: swap files are scratch, not checkpoints).

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "offload/io_engine.h"

namespace fathom::offload {

class SwapFile;

class TensorSwapper {
 public:
  // `path_key`: the config key that names the directory's parent, for errors.
  TensorSwapper(std::string directory, AioOptions aio, IoBackend backend = IoBackend::Auto,
                const std::string& path_key = "zero_optimization.offload_optimizer.nvme_path");
  ~TensorSwapper();
  TensorSwapper(const TensorSwapper&) = delete;
  TensorSwapper& operator=(const TensorSwapper&) = delete;

  // A new group's id (its file is "<directory>/group<id>.swp").
  size_t add_group();
  // Writes `tensors` (in this order); finish releases their memory once the data is on disk.
  void begin_swap_out(size_t group, std::vector<Tensor> tensors);
  void finish_swap_out(size_t group);
  // Refills `tensors` (the same sizes, in the same order as written) and reads them back;
  // finish waits and checks the file.
  void begin_swap_in(size_t group, std::vector<Tensor> tensors);
  void finish_swap_in(size_t group);
  // Whether the group was swapped out at least once (its file holds state).
  bool holds_state(size_t group) const;

  const std::string& directory() const { return directory_; }
  IoEngine& engine() { return engine_; }

 private:
  struct Group;
  Group& group(size_t id) const;
  std::string directory_;
  std::vector<std::string> created_;  // the directories it made, innermost last
  IoEngine engine_;
  std::vector<std::unique_ptr<Group>> groups_;
};

}  // namespace fathom::offload
