#pragma once
// Pipeline schedules as data: for each stage, the list of instructions it runs in one optimizer
// step (docs/pipeline_parallel.md). Generating them is pure arithmetic, so every schedule is
// checked — each transfer matched, no deadlock, dependencies respected, memory within its bound
// — before any rank runs it, and tested for many shapes without communication.
//
//   auto programs = make_pipe_schedule(PipeScheduleKind::OneFOneB, {.stages = 4, .micro_batches = 8});
//   check_pipe_schedule(programs, shape);       // throws, naming the stuck stages
//   for (const PipeInstruction& i : programs[stage]) ...
//
// Model chunks: with the interleaved schedule a rank holds `chunks` pieces of the model;
// chunk c of stage s is virtual stage c·stages + s, and activations flow through virtual stages
// in order (rank p-1's chunk c feeds rank 0's chunk c+1).
//
// Transfers: consecutive transfer instructions form one exchange, posted together and waited on
// together (an NCCL group). The checker assumes the strictest transport — a send completes only
// when its receive is posted — so a checked schedule cannot deadlock on MPI or NCCL; and between
// two stages, messages in one direction are received in the order they were sent.

#include <cstdint>
#include <string>
#include <vector>

namespace fathom::parallel {

enum class PipeOp : uint8_t {
  Forward,         // the chunk's layers on a micro-batch (the first reads the batch, the last the loss)
  Backward,        // input and weight gradients together
  BackwardInput,   // zero bubble: the input gradient only (B)
  BackwardWeight,  // zero bubble: the deferred weight gradient (W)
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
  ReduceTied,      // the tied copies' gradients into their leader (after the last backward)
  OptimizerStep,   // gradient reductions finish, the step, tied copies refreshed
};
const char* pipe_op_name(PipeOp op);

struct PipeInstruction {
  PipeOp op = PipeOp::Forward;
  int micro_batch = -1;  // -1 for the step's ReduceTied and OptimizerStep
  int chunk = 0;
  bool is_transfer() const;
  bool is_compute() const;  // Forward and the backwards
  std::string str() const;  // "forward(mb 3, chunk 1)"
  friend bool operator==(const PipeInstruction&, const PipeInstruction&) = default;
};
using StageProgram = std::vector<PipeInstruction>;

enum class PipeScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubble };
// "gpipe", "1f1b", "interleaved", "zero_bubble"; an unknown name is an error listing them.
PipeScheduleKind parse_pipe_schedule(const std::string& name);
const char* pipe_schedule_name(PipeScheduleKind kind);

struct PipeShape {
  int stages = 1;
  int micro_batches = 1;
  int chunks = 1;  // model chunks per stage (interleaved only)
  int virtual_stages() const { return stages * chunks; }
};

// Every stage's program; errors name the rule broken (interleaved: at least 2 stages and
// micro-batches a multiple of the stages, as Megatron's schedule requires).
std::vector<StageProgram> make_pipe_schedule(PipeScheduleKind kind, const PipeShape& shape);

// Throws unless every stage runs each micro-batch's forward and backward exactly once per chunk,
// after what it depends on, every send has its receive (same order per direction), and
// executing all programs with blocking exchanges finishes (the error names each stage's
// instruction where it is stuck).
void check_pipe_schedule(const std::vector<StageProgram>& programs, const PipeShape& shape);

// The most micro-batch chunks a stage holds activations for at once: forwards run whose input
// gradient (Backward or BackwardInput) has not, and forwards whose weight gradient has not yet run.
struct InFlight {
  int activations = 0;       // forward done, input gradient not
  int weight_gradients = 0;  // forward done, weight gradient not (what zero bubble defers)
};
InFlight max_in_flight(const StageProgram& program);
// The schedule's bound on InFlight::activations at `stage`: GPipe m; 1F1B and zero bubble
// p − s (capped at m); interleaved Megatron's warm-up 2(p − s − 1) + (v − 1)·p plus one, in chunks.
int activation_bound(PipeScheduleKind kind, const PipeShape& shape, int stage);

// Replays the programs with given per-op times (same for every stage; transfers take `transfer`
// each exchange) under the checker's transport: each stage's busy time, idle time and its ops'
// start and end, for bubble tables and Gantt charts.
struct OpTimes {
  double forward = 1, backward_input = 1, backward_weight = 1, transfer = 0, step = 0;
};
struct TimedOp {
  PipeInstruction instruction;
  double start = 0, end = 0;
};
struct StageReplay {
  double busy = 0;    // compute ops only
  double finish = 0;  // when its last instruction ended
  std::vector<TimedOp> ops;
};
std::vector<StageReplay> replay_pipe_schedule(const std::vector<StageProgram>& programs, const PipeShape& shape,
                                              const OpTimes& times);
// A text Gantt chart, one row per stage: "F3" forward of micro-batch 3, "B"/"W" the backwards,
// "." idle, one column per `unit` of time.
std::string gantt_chart(const std::vector<StageReplay>& replay, double unit);

}  // namespace fathom::parallel
