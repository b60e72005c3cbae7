#pragma once
// Activation checkpointing, non-reentrant.
//
// checkpoint(segment, inputs) runs `segment` normally — the backward graph is recorded, so
// hooks, grad-ready counts and gradients are exactly as without checkpointing — but keeps none
// of the activations the segment's nodes would save. When backward first needs one, the
// segment's forward is run again (with its random state replayed) and the saved tensors are
// taken from that run. Peak activation memory drops to the segment's inputs and outputs.
//
// State a recomputation must replay (an RNG's offset, a dropout call counter) is registered
// with register_checkpoint_state: saved before the segment runs, restored before it reruns.

#include <any>
#include <functional>

#include "autograd/variable.h"

namespace fathom::autograd {

using Segment = std::function<VariableList(const VariableList&)>;

VariableList checkpoint(const Segment& segment, const VariableList& inputs);

// True on the thread that is re-running a segment's forward for its backward. Module hooks that
// manage resources around a forward (ZeRO-3 gathers a module's parameters before it and releases
// them after) must keep what the recomputation gathered: the backward about to run reads it.
bool is_recomputing();

struct CheckpointState {
  std::function<std::any()> save;
  std::function<void(const std::any&)> restore;
};
int register_checkpoint_state(CheckpointState state);
void unregister_checkpoint_state(int id);

}  // namespace fathom::autograd
