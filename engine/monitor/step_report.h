#pragma once
// What the engine reports after each optimizer step: the progress line, the monitors' events and
// the step instruments (flops profiler, trace) read it. A plain record, so nothing that reads a
// step's figures needs the engine.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/monitor/step_timers.h"
#include "zero/io_totals.h"

namespace fathom {

// What the engine reports after each optimizer step.
struct StepReport {
  int64_t step = 0;              // global steps taken
  int64_t samples = 0;           // global samples seen
  double loss = 0.0;             // mean loss of the step (unscaled)
  double lr = 0.0;
  double grad_norm = 0.0;        // before clipping
  double seconds = 0.0;          // wall time of the whole step (all its micro-batches)
  double samples_per_second = 0.0;
  double tokens_per_second = 0.0;  // integer inputs counted as tokens
  // The step's phases summed over its micro-batches, and each micro-step's (engine/monitor/step_timers.h):
  // host clocks, or CUDA events on the compute stream for a GPU model with wall_clock_breakdown.
  PhaseTimes times;
  std::vector<PhaseTimes> micro_step_times;
  // memory_breakdown, at the steps that are printed: this rank's allocator tags after the last
  // forward, after the last backward and after the step, one line each.
  std::vector<std::string> memory_breakdown;
  double loss_scale = 1.0;       // fp16: the scale this step used
  bool skipped = false;          // fp16: the step overflowed and was skipped
  int64_t skipped_steps = 0;     // fp16: skipped so far
  // Offload to nvme: what this rank's swap files moved during the step, and how long it waited.
  std::optional<zero::IoTotals> io;
};

}  // namespace fathom
