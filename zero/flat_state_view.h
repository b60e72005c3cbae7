#pragma once
// FlatStateView: a training state as checkpoints see it (docs/checkpoints.md). Every per-element
// state — parameters, fp32 masters, the optimizer's — is addressed in flat coordinates, the
// model's parameters concatenated in named order [0, Ψ), whatever the state's layout (replicated,
// sharded, in swap files): so any layout saves what any other loads. Every training state has one
// (TrainingState::flat_view()), and checkpoints save and load a state's tensors through it alone.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/optimizer.h"
#include "zero/partition.h"

namespace fathom::zero {

// A parameter in flat coordinates.
struct FlatSlot {
  std::string name;
  Shape shape;
  int64_t offset = 0, numel = 0;
  Range range() const { return {offset, offset + numel}; }
};

// One per-element state over a range of flat coordinates: "param", "master", "optim.<state>".
// In memory (`values`), or streamed: states in swap files are read a part at a time when asked
// (`stream`, in `stream_dtype`), so that a checkpoint never holds a whole shard of them.
struct FlatRange {
  std::string name;
  Tensor values;  // 1-D, `covers.size()` elements; undefined when streamed
  Range covers;
  std::function<Tensor(Range part)> stream = {};  // the values over `part` (within covers)
  DType stream_dtype = DType::F32;

  DType dtype() const { return values.defined() ? values.dtype() : stream_dtype; }
  Tensor over(Range part) const {
    return values.defined() ? values.narrow(0, part.begin - covers.begin, part.size()) : stream(part);
  }
};

// Reads a per-element state of a checkpoint into `target` (flat over `covers`).
using FlatReader = std::function<void(const std::string& state, const Tensor& target, Range covers)>;

// What a checkpoint being loaded holds, besides its per-element states.
struct SavedStates {
  bool has_master = false;                    // it was written in mixed precision
  int64_t optimizer_step = 0;                 // 0: no optimizer state saved
  std::vector<std::string> optimizer_states;  // "exp_avg", ...
  nn::OptimizerStateDict scalars;             // the optimizer's per-group scalars (lr, ...)
};

class FlatStateView {
 public:
  virtual ~FlatStateView() = default;

  // The model's tensor table, and the dtype its parameters are stored in.
  virtual std::vector<FlatSlot> flat_slots() const = 0;
  virtual DType parameter_dtype() const = 0;
  // This rank's per-element states restricted to `wanted`, and loading them back from any saved
  // layout.
  virtual std::vector<FlatRange> flat_ranges(Range wanted) const = 0;
  virtual void load_flat_ranges(const FlatReader& read, const SavedStates& saved) = 0;
  // The optimizer's step count (0 before the first step) and its per-element states' names
  // ("exp_avg", ...; sorted, none before the first step), the same on every rank.
  virtual int64_t optimizer_steps() const = 0;
  virtual std::vector<std::string> optimizer_state_names() const = 0;
};

}  // namespace fathom::zero
