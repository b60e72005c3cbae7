#pragma once
// The step timeline (Fathom's "trace" section): the traced steps as Chrome trace-event JSON,
// which Perfetto (ui.perfetto.dev) and chrome://tracing open. One process per rank; on each,
// a compute track — the forward, backward and optimizer-step phases, and within them every
// module's forward and backward — and one track per communicator with its collectives (ZeRO's
// bucket reductions and gathers, point-to-point transfers, the step's scalar reductions).
//
// Clocks: at the first traced step every rank passes a barrier and takes that moment as its
// time zero, so one offset per rank aligns the tracks (to within the barrier's skew, which is
// the latency of one small message). The first rank gathers every rank's events and writes
// output_path/trace.json after the last traced step.
//
// A module's backward span runs from its output's gradient arriving to its input's gradient
// being computed (identity autograd nodes on both sides), or, for a module whose inputs need no
// gradient (an embedding), to its parameters' gradients being final. On a GPU every span
// boundary waits for the device, so spans show the kernels' time, at the cost of overlap
// within the traced steps; collectives on NCCL span from issue to the host seeing them done.

#include <cstdint>
#include <memory>
#include <string>

#include "engine/monitor/step_instrument.h"
#include "nn/module.h"
#include "parallel/communicator.h"

namespace fathom {

struct TraceOptions {
  std::string output_path;  // the folder of trace.json; "" = the working directory
  int64_t first_step = 2, last_step = 3;  // 1-based, inclusive
};

class StepTrace final : public StepInstrument {
 public:
  // `world`: every rank of the job (for the barrier and the gather); all of them trace.
  StepTrace(nn::Module& model, TraceOptions options, std::shared_ptr<parallel::Communicator> world);
  ~StepTrace() override;

  // Where the first rank writes the file.
  std::string path() const;

  void begin_step(Engine& engine, int64_t step) override;  // the first traced step: the barrier
  void before_forward(Engine& engine, int64_t step) override;
  void after_forward(Engine& engine, int64_t step) override;
  void before_backward(Engine& engine, int64_t step) override;
  void after_backward(Engine& engine, int64_t step) override;
  void before_optimizer_step(Engine& engine, int64_t step) override;
  void after_optimizer_step(Engine& engine, const StepReport& report) override;

  class Recorder;  // the events, shared with the collective observer and the autograd markers

 private:
  bool traced(int64_t step) const { return step >= options_.first_step && step <= options_.last_step; }
  void begin_tracing();
  void finish_tracing();

  nn::Module& model_;
  TraceOptions options_;
  std::shared_ptr<parallel::Communicator> world_;
  std::shared_ptr<Recorder> recorder_;
  struct Attachments;  // module hooks and the collective observation, while tracing
  std::unique_ptr<Attachments> attached_;
  bool finished_ = false;
};

}  // namespace fathom
