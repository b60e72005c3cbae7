#pragma once
// What watches the engine's steps from outside it: the flops profiler (engine/monitor/flops_profiler.h)
// and the step timeline (engine/monitor/trace.h). The engine calls every instrument around its phases,
// so a new kind of measurement is a new instrument, not a new branch in the engine.

#include <cstdint>

namespace fathom {

class Engine;
struct StepReport;

class StepInstrument {
 public:
  virtual ~StepInstrument() = default;
  // `step`: the 1-based number of the optimizer step the phase belongs to.
  // At the start of each optimizer step, on every rank, before the step's first forward and
  // before any communication of the step: the one place an instrument may use a collective.
  // (Under a pipeline the stages reach their first forward at different times — stage 1 only
  // after stage 0's activations arrive — so a collective in before_forward would deadlock.)
  virtual void begin_step(Engine&, int64_t /*step*/) {}
  virtual void before_forward(Engine&, int64_t /*step*/) {}
  virtual void after_forward(Engine&, int64_t /*step*/) {}
  virtual void before_backward(Engine&, int64_t /*step*/) {}
  virtual void after_backward(Engine&, int64_t /*step*/) {}
  virtual void before_optimizer_step(Engine&, int64_t /*step*/) {}
  // After the step's report is complete (report.step is its number), before it is printed.
  virtual void after_optimizer_step(Engine&, const StepReport& /*report*/) {}
};

}  // namespace fathom
