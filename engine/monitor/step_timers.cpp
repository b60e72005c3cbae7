#include "engine/monitor/step_timers.h"

#include <cstdio>
#include <optional>
#include <utility>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"

namespace fathom {

double& PhaseTimes::operator[](Phase phase) {
  switch (phase) {
    case Phase::Forward: return forward_ms;
    case Phase::Backward: return backward_ms;
    case Phase::BackwardInner: return backward_inner_ms;
    case Phase::BackwardAllreduce: return backward_allreduce_ms;
    case Phase::Step: return step_ms;
  }
  FATHOM_FAIL("PhaseTimes: unknown phase ", static_cast<int>(phase));
}

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& other) {
  forward_ms += other.forward_ms;
  backward_ms += other.backward_ms;
  backward_inner_ms += other.backward_inner_ms;
  backward_allreduce_ms += other.backward_allreduce_ms;
  step_ms += other.step_ms;
  return *this;
}

std::string format_phase_times(const PhaseTimes& t, const std::string& suffix) {
  const char* s = suffix.c_str();
  char line[320];
  std::snprintf(line, sizeof line, "time (ms) | fwd%s: %.2f | bwd%s: %.2f | bwd_inner%s: %.2f | bwd_allreduce%s: %.2f | step%s: %.2f",
                s, t.forward_ms, s, t.backward_ms, s, t.backward_inner_ms, s, t.backward_allreduce_ms, s, t.step_ms);
  return line;
}

// Per phase: the event recorded at start() and the (start, stop) pairs awaiting their read.
struct StepTimers::DeviceSpans {
  std::array<std::optional<cuda::Event>, kPhaseCount> open;
  struct Span {
    Phase phase;
    cuda::Event begin, end;
  };
  std::vector<Span> closed;
};

StepTimers::StepTimers(bool device_events)
    : device_events_(device_events), spans_(device_events ? std::make_unique<DeviceSpans>() : nullptr) {}

StepTimers::~StepTimers() = default;

void StepTimers::start(Phase phase) {
  FATHOM_CHECK(phase != Phase::Backward, "StepTimers: backward is timed as its two parts");
  const auto p = static_cast<size_t>(phase);
  if (!device_events_) return void(started_[p] = Clock::now());
  spans_->open[p].emplace(/*timing=*/true);
  spans_->open[p]->record_on_current_stream();
}

void StepTimers::stop(Phase phase) {
  const auto p = static_cast<size_t>(phase);
  if (!device_events_) {
    micro_[phase] += std::chrono::duration<double, std::milli>(Clock::now() - started_[p]).count();
    return;
  }
  FATHOM_CHECK(spans_->open[p].has_value(), "StepTimers: stop without start");
  cuda::Event end(/*timing=*/true);
  end.record_on_current_stream();
  spans_->closed.push_back({phase, std::move(*spans_->open[p]), std::move(end)});
  spans_->open[p].reset();
}

PhaseTimes StepTimers::end_micro_step() {
  if (device_events_) {
    for (const DeviceSpans::Span& span : spans_->closed) {
      span.end.synchronize();
      micro_[span.phase] += span.begin.elapsed_ms(span.end);
    }
    spans_->closed.clear();
  }
  micro_.backward_ms = micro_.backward_inner_ms + micro_.backward_allreduce_ms;
  const PhaseTimes micro = std::exchange(micro_, PhaseTimes{});
  cycle_ += micro;
  return micro;
}

PhaseTimes StepTimers::end_cycle() { return std::exchange(cycle_, PhaseTimes{}); }

}  // namespace fathom
