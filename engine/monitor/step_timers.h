#pragma once
// The engine's phase timers (DeepSpeed's wall_clock_breakdown): forward, backward with its two
// parts, and the optimizer step, per micro-step and summed over the accumulation cycle.
//
// On the CPU a phase's time is its host time. On a GPU the host only enqueues kernels, so its
// clock says when work was queued, not how long it ran: there each phase is timed by a pair of
// CUDA timing events on the compute stream, read when a micro-step ends (which waits for the
// device; the engine times with events only under wall_clock_breakdown, as DeepSpeed's
// synchronised timers do).

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fathom {

enum class Phase : uint8_t { Forward, Backward, BackwardInner, BackwardAllreduce, Step };
inline constexpr size_t kPhaseCount = 5;

// Milliseconds per phase. backward = backward_inner (autograd's pass, with the reductions it
// overlaps) + backward_allreduce (the wait for the reductions still in flight when it ends).
struct PhaseTimes {
  double forward_ms = 0, backward_ms = 0, backward_inner_ms = 0, backward_allreduce_ms = 0, step_ms = 0;
  double& operator[](Phase phase);
  PhaseTimes& operator+=(const PhaseTimes& other);
};

// DeepSpeed's timer line: "time (ms) | fwd: 4.88 | bwd: ... | step: 0.27"; `suffix` "_microstep"
// gives its per-micro-step form ("fwd_microstep: ...").
std::string format_phase_times(const PhaseTimes& times, const std::string& suffix = "");

class StepTimers {
 public:
  // device_events: time with CUDA events on the compute stream instead of the host clock.
  explicit StepTimers(bool device_events = false);
  ~StepTimers();
  StepTimers(const StepTimers&) = delete;
  StepTimers& operator=(const StepTimers&) = delete;

  bool device_events() const { return device_events_; }
  // Any phase but Backward, which is the sum of its two parts (so they add up exactly).
  void start(Phase phase);
  void stop(Phase phase);  // adds the time since start(phase) to the micro-step
  // The micro-step's phases (since the previous call), which also join the cycle's sums.
  PhaseTimes end_micro_step();
  // The cycle's sums, and a new cycle begins.
  PhaseTimes end_cycle();

 private:
  struct DeviceSpans;  // CUDA events, recorded and not yet read
  using Clock = std::chrono::steady_clock;
  bool device_events_;
  std::array<Clock::time_point, kPhaseCount> started_{};
  PhaseTimes micro_, cycle_;
  std::unique_ptr<DeviceSpans> spans_;
};

}  // namespace fathom
