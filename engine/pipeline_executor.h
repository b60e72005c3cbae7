#pragma once
// PipelineExecutor: the Schedule (engine/engine.h) that runs one optimizer step of a pipelined
// model — this rank's instruction list (parallel/pipeline_schedule.h), checked for deadlock
// freedom when it is made — through the engine's micro-step API:
//
//   forward            engine(input) on the stage's chunk; the first stage reads the batch, the
//                      last one computes the loss from the batch's targets
//   backward           engine.backward_stage from the loss, or from the output with the
//                      gradient the next stage sent; zero bubble: B then W (backward_weights)
//   send/recv          activations forward and gradients backward between neighbouring stages,
//                      consecutive ones posted together; the stage waits for the receives and
//                      lets the sends complete in the background (all done before the step)
//   reduce_tied        the tied copies' gradients summed over their group
//   optimizer_step     engine.optimizer_step()
//
// Only the first and last stages call the batch source. What crosses a stage boundary is agreed
// once per step per boundary: a small header (dtype, shape, whether it needs a gradient, the
// rows' sample indices follow) precedes its first activation, so the receiver allocates the
// right buffer; an activation that needs no gradient gets none back. The gradient accumulation
// boundary is the last backward that touches this stage's parameters.
//
// Errors: a layer that cannot take what the previous stage sent names both stages, the
// micro-batch and the tensor; a transfer that does not complete within FATHOM_COMM_TIMEOUT ends
// the job naming the stage, the micro-batch and the direction; with FATHOM_COMM_DEBUG=1 the
// stages first check that they run the same schedule over the same shape.

#include <memory>
#include <vector>

#include "engine/engine.h"
#include "parallel/pipeline_schedule.h"

namespace fathom {

namespace parallel {
class PipelineModule;
}

// DeepSpeed's pipe_partitioned / grad_partitioned: with tensor parallelism (and no sequence
// parallelism, whose activations already differ between the tensor ranks) every tensor rank
// holds the same activation and gradient at a stage boundary, so each sends 1/tp of it and the
// receiving stage's tensor ranks all-gather the whole: tp times less traffic between stages.
struct StageTransfers {
  bool partition_activations = false;
  bool partition_gradients = false;
};

class PipelineExecutor final : public Schedule {
 public:
  // `micro_batches`: gradient_accumulation_steps (DeepSpeed's rule).
  PipelineExecutor(parallel::PipeScheduleKind kind, const parallel::PipelineModule& module, int micro_batches,
                   StageTransfers transfers = {});
  ~PipelineExecutor() override;
  void run(Engine& engine, const NextBatch& next, const LossFunction& loss) override;

  const parallel::StageProgram& program() const { return program_; }
  // Recording: each instruction's start and end (ms from the step's start; an exchange's
  // transfers share theirs) in the last step, for bubble measurements and timelines.
  void set_recording(bool on) { recording_ = on; }
  const std::vector<parallel::TimedOp>& last_step() const { return recorded_; }
  const parallel::PipeShape& shape() const { return shape_; }
  parallel::PipeScheduleKind kind() const { return kind_; }

 private:
  parallel::PipeScheduleKind kind_;
  parallel::PipeShape shape_;
  StageTransfers transfers_;
  int stage_ = 0;
  parallel::StageProgram program_;
  size_t last_parameter_backward_ = 0;  // the program's index of the accumulation boundary
  bool recording_ = false;
  std::vector<parallel::TimedOp> recorded_;
};

// The loss of `batch` through every stage's layers, without gradients, the same on every rank of
// the pipeline group (collective over it; each rank passes the batch, which only the first and
// last stages read): validation of a pipelined model.
double pipeline_loss(parallel::PipelineModule& module, const Batch& batch, const LossFunction& loss);

}  // namespace fathom
