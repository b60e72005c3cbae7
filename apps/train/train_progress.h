#pragma once
// What fathom-train prints: the run's header (model, data, layout), and after each optimizer
// step the progress line at steps_per_print (loss, lr, throughput, gradient norm, memory, the
// swap files' I/O, elapsed < remaining), with wall_clock_breakdown's timers and
// memory_breakdown's tags under it, and the memory per rank after the first step. The first
// rank prints; every rank writes its tokens/s to the monitors (only the first has any).

#include <chrono>
#include <cstdint>
#include <string>

#include "apps/train/train_data.h"
#include "apps/train/train_plan.h"
#include "engine/engine.h"

namespace fathom::apps {

// mm:ss.
std::string clock_text(double seconds);

void print_run_header(const TrainPlan& plan, const models::ModelSpec& model, int64_t parameter_count,
                      const TrainData& data, int64_t tokens_per_step, int world_size, Device device);

// The engine's on_step callback.
class ProgressLine {
 public:
  ProgressLine(Engine& engine, int64_t steps, bool main_rank, Device device);
  void operator()(const StepReport& report) const;
  double elapsed() const;  // seconds since the run started

 private:
  Engine* engine_;
  int64_t steps_;
  bool main_rank_;
  Device device_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace fathom::apps
