#pragma once
// SwappedGradients: a ZeRO rank's gradient shard in swap files, one per optimizer sub-group
// (offload_optimizer nvme at stages 2-3; the GradientShard interface, zero/gradient_shard.h), so
// that with the parameters (offload_param nvme) and the optimizer states a step streams every
// sub-group's model states through the I/O engine and none is whole in memory.
//
// Backward adds each reduced bucket's part in descending shard order, so once a part starts
// below a sub-group that sub-group is final for this backward: it is written out (the write
// overlapping what follows) and its memory freed. In host memory at once: the sub-group being
// added into, the one below it when a part straddles the two, and one being written. A later
// micro-step reads a sub-group back before adding into it; a sub-group nothing was added to yet
// is zero and costs no I/O.
//
// At the boundary each sub-group is converted to fp32 as it goes out, and its overflow flag and
// its part of the norm are taken then, from the values in memory: the norm's fixed blocks
// (norm_pieces) that straddle two sub-groups are assembled from both in a small buffer, so the
// norm is the resident gradient's bit for bit without reading anything back. Scaling (unscale,
// clipping) is recorded and applied when a sub-group is read; after a scale the checks read the
// shard again (fp16's unscale, which comes before the norm).

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "offload/tensor_swapper.h"
#include "zero/gradient_shard.h"

namespace fathom::zero {

class SwappedGradients final : public GradientShard {
 public:
  struct Options {
    std::string directory;  // the swap files' directory (created; removed with them)
    offload::AioOptions aio;
    offload::IoBackend backend = offload::IoBackend::Auto;
    bool pin_memory = true;
    int64_t norm_block = kNormBlockElements;
  };
  // `groups`: the optimizer's sub-groups, ascending and covering the shard; `accumulated`: the
  // dtype backward adds in.
  SwappedGradients(std::vector<Range> groups, DType accumulated, std::vector<Range> counted, Options options);
  ~SwappedGradients() override;

  void begin_backward(bool boundary) override { boundary_ = boundary; }
  void add(const Tensor& part, int64_t offset) override;
  void assign(Tensor reduced) override;
  void end_backward(bool boundary) override;
  bool complete() const override { return complete_; }
  bool has_inf_or_nan() override;
  double norm() override;
  void scale(double factor) override;
  Tensor read(Range range) override;
  void write(Range range, const Tensor& values) override;
  void prefetch(Range range) override;
  void done_with(Range range) override;
  void zero() override;
  Device device() const override { return kCPU; }
  std::optional<offload::IoEngine::Counters> io_counters() const override { return swapper_->engine().counters(); }

  // The most gradient elements in host memory at once so far (sub-groups and straddling blocks).
  int64_t peak_resident_elements() const { return peak_resident_; }

 private:
  enum class State { Zero, InMemory, Reading, Stored };
  struct Group {
    Range range;
    size_t file = 0;
    Tensor values;  // as stored: the accumulating dtype, or fp32 once complete; released while Stored
    State state = State::Zero;
    bool writing = false;        // a write in flight (its memory is freed when it finishes)
    bool in_file = false;        // the file holds this cycle's values (else they are zero)
    bool final = false;          // written in this backward: no part may arrive for it again
    std::vector<double> scales;  // complete: applied, in order, to the values read
    bool checked = false;        // complete: its overflow flag and norm pieces are counted
    bool inf_or_nan = false;
  };
  size_t group_at(int64_t offset) const;  // the sub-group holding shard element `offset`
  size_t group_of(Range range) const;     // a whole sub-group's index
  void bring_in(size_t g);                // into memory, as stored
  void finish_read(size_t g);
  void finish_write(size_t g);
  // Begins its write (the previous one finished first); `complete`: the boundary's last values,
  // converted to fp32 and checked first.
  void write_out(size_t g, bool complete);
  void finish_writes();
  void drop(size_t g);                    // its memory freed, the file (or zero) still the truth
  void forget_checks();                   // the values changed: checks are taken again
  Tensor fp32_values(const Group& g) const;  // in memory: fp32, the recorded scales applied
  void check(size_t g, const Tensor& fp32);  // its overflow flag and norm pieces
  void check_all();                       // every sub-group not yet checked, read back if needed
  void track(int64_t elements);

  std::vector<Group> groups_;
  DType accumulated_;
  Options options_;
  std::unique_ptr<offload::TensorSwapper> swapper_;
  std::deque<size_t> writes_;  // sub-groups being written, oldest first
  bool boundary_ = false, complete_ = false;
  std::vector<double> squares_;  // each norm piece's, once its sub-groups are checked
  struct Straddling {
    Tensor values;  // the piece's fp32 values, filled from each sub-group it spans
    int64_t filled = 0;
  };
  std::map<size_t, Straddling> straddling_;  // by norm piece
  int64_t resident_ = 0, peak_resident_ = 0;
};

}  // namespace fathom::zero
