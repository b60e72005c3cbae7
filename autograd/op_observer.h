#pragma once
// Watching the registry ops a thread runs through autograd (the flops profiler counts with it):
// apply_op tells the innermost observer installed on the calling thread about every op it runs,
// with its inputs and outputs. Backward passes run gradient definitions, not apply_op, so only
// forward computation is seen (and a checkpointed segment's recomputation).

#include "kernels/op_registry.h"

namespace fathom::autograd {

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_op(const OpInfo& op, const TensorList& inputs, const TensorList& outputs, const Attributes& attrs) = 0;
};

// Installs `observer` on this thread for the scope's lifetime (nests; the innermost is told).
class OpObserverScope {
 public:
  explicit OpObserverScope(OpObserver* observer);
  ~OpObserverScope();
  OpObserverScope(const OpObserverScope&) = delete;
  OpObserverScope& operator=(const OpObserverScope&) = delete;

 private:
  OpObserver* previous_;
};

OpObserver* current_op_observer();  // null when none

}  // namespace fathom::autograd
