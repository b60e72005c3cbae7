#pragma once
// An optimizer's per-element states (exp_avg, ...) in flat coordinates, for checkpoints.
//
// The optimizer's state_dict names states "<key>.<state>", one key per variable it updates:
// the parameters' names at stage 0, "zero_shard" (one flat variable) at ZeRO. `keys[i]` covers
// `slots[i]` (offsets relative to `covers.begin`); together they cover `covers`.

#include <string>
#include <vector>

#include "nn/optimizer.h"
#include "zero/flat_state_view.h"

namespace fathom::zero {

// How the optimizer's state_dict keys map onto flat coordinates (above).
struct OptimizerLayout {
  std::vector<std::string> keys;
  std::vector<FlatSlot> slots;
  Range covers;
};

// The optimizer's step count (the first key's "step"; 0 before any step).
int64_t optimizer_step_count(const nn::Optimizer& optimizer, const OptimizerLayout& layout);
// The names of its per-element states, sorted ("exp_avg", ...; none before the first step).
std::vector<std::string> optimizer_state_names(const nn::Optimizer& optimizer, const OptimizerLayout& layout);
// Each state as one flat tensor over layout.covers ("optim.<state>"); none before the first step.
std::vector<FlatRange> optimizer_flat_ranges(const nn::Optimizer& optimizer, const OptimizerLayout& layout);
// Loads saved.scalars and, when the checkpoint has them, the states over layout.covers.
void load_optimizer_flat_ranges(nn::Optimizer& optimizer, const OptimizerLayout& layout, const FlatReader& read,
                                const SavedStates& saved);

}  // namespace fathom::zero
