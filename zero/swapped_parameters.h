#pragma once
// SwappedParameters: a ZeRO-3 rank's parameter shard in swap files (offload_param nvme; the
// ParameterStore interface, zero/parameter_store.h). Each piece — one parameter's part of the
// shard — is a host-tier tensor with its own checksummed swap file (offload/tensor_swapper.h), so
// a damaged file is detected when read, never gathered into the model.
//
// Memory: at most max_in_cpu elements of the shard are in host memory at once — pieces in use by
// an all-gather, read ahead, being written, or cached after use (the least recently used go
// first when room is needed) — and at most buffer_count reads and writes are in flight, each of
// one piece of at most buffer_size elements. Reads ahead keep room for the largest piece free, so
// that a piece asked for without notice can always come in. A piece never assigned is zero and
// costs no I/O.
//
// Parameters change only in the optimizer step, which assigns each sub-group's rounded values
// here (each piece written once all of it is assigned, or at flush); between steps the files are
// the truth and cached pieces are clean, so evicting one is just releasing its memory.

#include <deque>
#include <list>
#include <memory>
#include <vector>

#include "offload/io_engine.h"
#include "offload/tensor_swapper.h"
#include "zero/parameter_store.h"

namespace fathom::zero {

class SwappedParameters final : public ParameterStore {
 public:
  SwappedParameters(const ParameterOffload& offload, std::vector<Piece> pieces, int64_t numel, DType dtype,
                    Device device);
  ~SwappedParameters() override;

  Tensor resident() const override { return {}; }
  Tensor acquire(size_t piece) override;
  void release(size_t piece) override;
  bool gathers_ahead() const override { return false; }
  bool prefetch(size_t piece) override;
  void settle() override;
  void check_module(const std::string& module, int64_t elements) const override;
  Tensor read(Range range) override;
  void assign(Range range, const Tensor& values) override;
  void flush() override;

  // The most elements of the shard in host memory at once so far.
  int64_t peak_resident_elements() const { return peak_resident_; }
  std::optional<offload::IoEngine::Counters> io_counters() const override { return swapper_->engine().counters(); }

 private:
  enum class State { Stored, Reading, Ahead, InUse, Cached, Dirty, Writing };
  struct Slot {
    Tensor data;           // the piece, its memory released while Stored
    size_t group = 0;      // its file in swapper_
    State state = State::Stored;
    int users = 0;         // InUse: acquires not yet released
    bool on_disk = false;  // written at least once (else its value is zero)
    int64_t unassigned = 0;  // Dirty: elements not yet assigned (written when none are left)
    std::list<size_t>::iterator in_lru;
  };
  int64_t size_of(size_t p) const { return pieces()[p].range.size(); }
  // Brings piece p into memory (Stored → Reading, or Ahead when it has nothing to read).
  void begin_read(size_t p);
  void finish_read(size_t p);
  void begin_write(size_t p);
  void finish_write(size_t p);
  void finish_oldest_io();
  // Frees cached pieces, then finishes writes, until `n` more elements fit with `headroom` spare;
  // false when they cannot (only cached pieces are freed when `may_wait` is false).
  bool make_room(int64_t n, int64_t headroom, bool may_wait);
  void need_room(size_t p);  // make_room for a piece asked for now, or an error
  void to_cache(size_t p);
  void out_of_cache(size_t p);
  void track(int64_t elements);

  ParameterOffload options_;
  std::unique_ptr<offload::TensorSwapper> swapper_;
  std::vector<Slot> slots_;
  std::list<size_t> lru_;           // cached pieces, least recently used first
  std::deque<size_t> in_flight_;    // pieces Reading or Writing, oldest first
  int64_t largest_ = 0;
  int64_t resident_ = 0, peak_resident_ = 0;
};

}  // namespace fathom::zero
