#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/error.h"

namespace fathom::parallel {

const char* pipe_op_name(PipeOp op) {
  switch (op) {
    case PipeOp::Forward: return "forward";
    case PipeOp::Backward: return "backward";
    case PipeOp::BackwardInput: return "backward_input";
    case PipeOp::BackwardWeight: return "backward_weight";
    case PipeOp::SendActivation: return "send_activation";
    case PipeOp::RecvActivation: return "recv_activation";
    case PipeOp::SendGradient: return "send_gradient";
    case PipeOp::RecvGradient: return "recv_gradient";
    case PipeOp::ReduceTied: return "reduce_tied";
    case PipeOp::OptimizerStep: return "optimizer_step";
  }
  return "?";
}

bool PipeInstruction::is_transfer() const {
  return op == PipeOp::SendActivation || op == PipeOp::RecvActivation || op == PipeOp::SendGradient ||
         op == PipeOp::RecvGradient;
}

bool PipeInstruction::is_compute() const {
  return op == PipeOp::Forward || op == PipeOp::Backward || op == PipeOp::BackwardInput ||
         op == PipeOp::BackwardWeight;
}

std::string PipeInstruction::str() const {
  if (micro_batch < 0) return pipe_op_name(op);
  return detail::concat(pipe_op_name(op), "(mb ", micro_batch, ", chunk ", chunk, ")");
}

PipeScheduleKind parse_pipe_schedule(const std::string& name) {
  if (name == "gpipe") return PipeScheduleKind::GPipe;
  if (name == "1f1b") return PipeScheduleKind::OneFOneB;
  if (name == "interleaved") return PipeScheduleKind::Interleaved;
  if (name == "zero_bubble") return PipeScheduleKind::ZeroBubble;
  FATHOM_FAIL("unknown pipeline schedule \"", name, "\"; use gpipe, 1f1b, interleaved or zero_bubble");
}

const char* pipe_schedule_name(PipeScheduleKind kind) {
  switch (kind) {
    case PipeScheduleKind::GPipe: return "gpipe";
    case PipeScheduleKind::OneFOneB: return "1f1b";
    case PipeScheduleKind::Interleaved: return "interleaved";
    case PipeScheduleKind::ZeroBubble: return "zero_bubble";
  }
  return "?";
}

namespace {

using Op = PipeOp;

int virtual_stage(const PipeShape& shape, int stage, int chunk) { return chunk * shape.stages + stage; }
int next_stage(const PipeShape& shape, int stage) { return (stage + 1) % shape.stages; }
int previous_stage(const PipeShape& shape, int stage) { return (stage + shape.stages - 1) % shape.stages; }

// What a stage computes, in order, in slots: the exchange after a slot sends what its ops
// produced and receives what the next slot's ops need (with_transfers).
using Slot = std::vector<PipeInstruction>;
using ComputeOrder = std::vector<Slot>;

ComputeOrder gpipe_order(const PipeShape& shape) {
  ComputeOrder order;
  for (int mb = 0; mb < shape.micro_batches; ++mb) order.push_back({{Op::Forward, mb}});
  for (int mb = 0; mb < shape.micro_batches; ++mb) order.push_back({{Op::Backward, mb}});
  return order;
}

// 1F1B: p − s − 1 forwards to fill the pipeline, then one forward and one backward in turn,
// then the backwards left.
ComputeOrder one_f_one_b_order(const PipeShape& shape, int stage) {
  const int m = shape.micro_batches;
  const int warmup = std::min(shape.stages - stage - 1, m);
  ComputeOrder order;
  for (int mb = 0; mb < warmup; ++mb) order.push_back({{Op::Forward, mb}});
  for (int k = 0; k < m - warmup; ++k) {
    order.push_back({{Op::Forward, warmup + k}});
    order.push_back({{Op::Backward, k}});
  }
  for (int k = m - warmup; k < m; ++k) order.push_back({{Op::Backward, k}});
  return order;
}

// ZB-H1 (Qi et al. 2023): 1F1B's order with each backward split into B, the input gradient,
// and W, the weight gradient, and stage s running each W s backwards late (the rest after its
// last B). B alone travels upstream, so the gradients come back sooner than 1F1B's whole
// backwards and the deferred Ws fill the gaps; a stage holds at most p − s + s = p micro-batches'
// activations, 1F1B's peak.
ComputeOrder zero_bubble_order(const PipeShape& shape, int stage) {
  ComputeOrder order;
  int backwards = 0, weights = 0;
  for (const Slot& slot : one_f_one_b_order(shape, stage)) {
    const PipeInstruction& op = slot.front();
    if (op.op == Op::Forward) {
      order.push_back(slot);
      continue;
    }
    order.push_back({{Op::BackwardInput, op.micro_batch}});
    if (++backwards - weights > stage) order.push_back({{Op::BackwardWeight, weights++}});
  }
  while (weights < shape.micro_batches) order.push_back({{Op::BackwardWeight, weights++}});
  return order;
}

// Megatron's interleaved 1F1B: micro-batches go through the chunks in groups of p; the warm-up
// is 2(p − s − 1) + (v − 1)·p forwards, and in the steady state a forward and a backward share
// one slot, so one exchange sends both their results and receives both next inputs.
ComputeOrder interleaved_order(const PipeShape& shape, int stage) {
  const int p = shape.stages, v = shape.chunks, m = shape.micro_batches;
  const int total = m * v;
  const auto unit = [&](int k, bool forward) {
    const int in_group = k % (p * v);
    const int chunk = forward ? in_group / p : v - 1 - in_group / p;
    return PipeInstruction{forward ? Op::Forward : Op::Backward, (k / (p * v)) * p + k % p, chunk};
  };
  const int warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  ComputeOrder order;
  for (int k = 0; k < warmup; ++k) order.push_back({unit(k, true)});
  for (int k = 0; k < total - warmup; ++k) order.push_back({unit(warmup + k, true), unit(k, false)});
  for (int k = total - warmup; k < total; ++k) order.push_back({unit(k, false)});
  return order;
}

// Each slot between two exchanges: before it the receives its ops need, after it the sends of
// what they produced, so one exchange holds a slot's sends and the next slot's receives
// (Megatron's batched p2p).
StageProgram with_transfers(const ComputeOrder& order, const PipeShape& shape, int stage) {
  StageProgram program;
  const int last = shape.virtual_stages() - 1;
  if (shape.stages == 1) {  // one stage: nothing to send
    for (const Slot& slot : order) program.insert(program.end(), slot.begin(), slot.end());
  } else {
    const auto is_input_gradient = [](const PipeInstruction& op) {
      return op.op == Op::Backward || op.op == Op::BackwardInput;
    };
    for (const Slot& slot : order) {
      for (const PipeInstruction& op : slot) {
        const int vs = virtual_stage(shape, stage, op.chunk);
        if (op.op == Op::Forward && vs > 0) program.push_back({Op::RecvActivation, op.micro_batch, op.chunk});
        if (is_input_gradient(op) && vs < last) program.push_back({Op::RecvGradient, op.micro_batch, op.chunk});
      }
      program.insert(program.end(), slot.begin(), slot.end());
      for (const PipeInstruction& op : slot) {
        const int vs = virtual_stage(shape, stage, op.chunk);
        if (op.op == Op::Forward && vs < last) program.push_back({Op::SendActivation, op.micro_batch, op.chunk});
        if (is_input_gradient(op) && vs > 0) program.push_back({Op::SendGradient, op.micro_batch, op.chunk});
      }
    }
  }
  program.push_back({Op::ReduceTied});
  program.push_back({Op::OptimizerStep});
  return program;
}

}  // namespace

std::vector<StageProgram> make_pipe_schedule(PipeScheduleKind kind, const PipeShape& shape) {
  FATHOM_CHECK(shape.stages >= 1 && shape.micro_batches >= 1 && shape.chunks >= 1,
               "pipeline schedule: stages, micro-batches and chunks must be >= 1, got ", shape.stages, ", ",
               shape.micro_batches, " and ", shape.chunks);
  if (kind == PipeScheduleKind::Interleaved) {
    FATHOM_CHECK(shape.stages >= 2, "pipeline schedule \"interleaved\" needs at least 2 stages, got ", shape.stages,
                 "; use \"1f1b\" for one stage");
    FATHOM_CHECK(shape.micro_batches % shape.stages == 0, "pipeline schedule \"interleaved\": the micro-batches (",
                 shape.micro_batches, ", gradient_accumulation_steps) must be a multiple of the stages (",
                 shape.stages, "), as Megatron's interleaved schedule requires");
  } else {
    FATHOM_CHECK(shape.chunks == 1, "pipeline schedule \"", pipe_schedule_name(kind),
                 "\" runs one model chunk per stage, got virtual_stages ", shape.chunks,
                 "; use \"interleaved\" for several");
  }
  std::vector<StageProgram> programs;
  for (int stage = 0; stage < shape.stages; ++stage) {
    ComputeOrder order;
    switch (kind) {
      case PipeScheduleKind::GPipe: order = gpipe_order(shape); break;
      case PipeScheduleKind::OneFOneB: order = one_f_one_b_order(shape, stage); break;
      case PipeScheduleKind::ZeroBubble: order = zero_bubble_order(shape, stage); break;
      case PipeScheduleKind::Interleaved: order = interleaved_order(shape, stage); break;
    }
    programs.push_back(with_transfers(order, shape, stage));
  }
  return programs;
}

namespace {

// A message between stages: an activation or a gradient of one micro-batch, named by the
// virtual stage that sends it.
struct Message {
  bool gradient = false;
  int micro_batch = 0, from = 0;  // from: the sender's virtual stage
  auto operator<=>(const Message&) const = default;
};

struct Transfer {
  Message message;
  int peer = 0;  // the other stage
  bool send = false;
};

Transfer transfer_of(const PipeInstruction& i, const PipeShape& shape, int stage) {
  const int vs = virtual_stage(shape, stage, i.chunk);
  switch (i.op) {
    case Op::SendActivation: return {{false, i.micro_batch, vs}, next_stage(shape, stage), true};
    case Op::RecvActivation: return {{false, i.micro_batch, vs - 1}, previous_stage(shape, stage), false};
    case Op::SendGradient: return {{true, i.micro_batch, vs}, previous_stage(shape, stage), true};
    case Op::RecvGradient: return {{true, i.micro_batch, vs + 1}, next_stage(shape, stage), false};
    default: FATHOM_FAIL("pipeline schedule: ", i.str(), " is not a transfer");
  }
}

// Static rules of one stage's program: each unit of work once, after what it needs.
void check_stage(const StageProgram& program, const PipeShape& shape, int stage) {
  const int last = shape.virtual_stages() - 1;
  const bool transfers = shape.stages > 1;
  std::map<std::pair<int, int>, std::map<Op, int>> seen;  // (mb, chunk) -> op -> times so far
  int steps = 0;
  const auto where = [&](const PipeInstruction& i) { return detail::concat("stage ", stage, ": ", i.str()); };
  for (const PipeInstruction& i : program) {
    if (i.op == Op::OptimizerStep || i.op == Op::ReduceTied) {
      steps += i.op == Op::OptimizerStep;
      continue;
    }
    FATHOM_CHECK(steps == 0, where(i), " comes after the optimizer step");
    FATHOM_CHECK(i.micro_batch >= 0 && i.micro_batch < shape.micro_batches && i.chunk >= 0 && i.chunk < shape.chunks,
                 where(i), " is outside ", shape.micro_batches, " micro-batches and ", shape.chunks, " chunks");
    auto& done = seen[{i.micro_batch, i.chunk}];
    const int vs = virtual_stage(shape, stage, i.chunk);
    const auto needs = [&](Op before, bool required) {
      FATHOM_CHECK(!required || done[before] > 0, where(i), " runs before ", pipe_op_name(before));
    };
    switch (i.op) {
      case Op::Forward: needs(Op::RecvActivation, transfers && vs > 0); break;
      case Op::Backward:
      case Op::BackwardInput:
        needs(Op::Forward, true);
        needs(Op::RecvGradient, transfers && vs < last);
        break;
      case Op::BackwardWeight: needs(Op::BackwardInput, true); break;
      case Op::SendActivation: needs(Op::Forward, true); break;
      case Op::SendGradient: FATHOM_CHECK(done[Op::Backward] + done[Op::BackwardInput] > 0, where(i), " runs before its backward"); break;
      default: break;
    }
    FATHOM_CHECK(++done[i.op] == 1, where(i), " runs twice");
  }
  FATHOM_CHECK(steps == 1, "stage ", stage, ": ", steps, " optimizer steps; a program takes exactly one");
  for (int mb = 0; mb < shape.micro_batches; ++mb)
    for (int chunk = 0; chunk < shape.chunks; ++chunk) {
      auto& done = seen[{mb, chunk}];
      const bool whole = done[Op::Backward] == 1 && done[Op::BackwardInput] == 0 && done[Op::BackwardWeight] == 0;
      const bool split = done[Op::Backward] == 0 && done[Op::BackwardInput] == 1 && done[Op::BackwardWeight] == 1;
      FATHOM_CHECK(done[Op::Forward] == 1 && (whole || split), "stage ", stage, ": micro-batch ", mb, " chunk ", chunk,
                   " is not run exactly once forward and once backward");
    }
}

// Messages between each ordered pair of stages must be received in the order they are sent
// (NCCL matches a pair's transfers in order, whatever the tags).
void check_order(const std::vector<StageProgram>& programs, const PipeShape& shape) {
  std::map<std::pair<int, int>, std::vector<Message>> sent, received;
  for (int s = 0; s < shape.stages; ++s)
    for (const PipeInstruction& i : programs[s])
      if (i.is_transfer()) {
        const Transfer t = transfer_of(i, shape, s);
        (t.send ? sent[{s, t.peer}] : received[{t.peer, s}]).push_back(t.message);
      }
  for (const auto& [pair, messages] : sent)
    FATHOM_CHECK(received[pair] == messages, "pipeline schedule: stage ", pair.second,
                 " receives stage ", pair.first, "'s messages in another order than they are sent (or not all)");
  for (const auto& [pair, messages] : received)
    FATHOM_CHECK(sent[pair] == messages, "pipeline schedule: stage ", pair.second, " waits for messages stage ",
                 pair.first, " never sends");
}

// Executes the programs: compute ops take their time; at an exchange the sends are posted at
// once (their completion is not waited for: the executor waits for them at the end of the step)
// and the exchange ends when each receive's message has been posted by its sender; ReduceTied
// joins the first and last stage and OptimizerStep every stage. On deadlock returns nothing and
// says where each stage waits through `stuck`.
std::vector<StageReplay> execute(const std::vector<StageProgram>& programs, const PipeShape& shape,
                                 const OpTimes& times, std::string* stuck) {
  const int p = shape.stages;
  std::vector<size_t> pc(p, 0);
  std::vector<double> clock(p, 0.0);
  std::vector<StageReplay> replay(p);
  // When each message was posted, by receiving stage.
  std::vector<std::map<Message, double>> posted_for(p);
  std::vector<bool> sends_posted(p, false);  // the current exchange's sends are out
  const auto exchange_end = [&](int s) {
    size_t end = pc[s];
    while (end < programs[s].size() && programs[s][end].is_transfer()) ++end;
    return end;
  };
  const auto cost = [&](const PipeInstruction& i) {
    switch (i.op) {
      case Op::Forward: return times.forward;
      case Op::Backward: return times.backward_input + times.backward_weight;
      case Op::BackwardInput: return times.backward_input;
      case Op::BackwardWeight: return times.backward_weight;
      default: return times.step;
    }
  };
  const auto joins = [&](Op op) {
    std::vector<int> members;
    if (op == Op::OptimizerStep) {
      for (int s = 0; s < p; ++s) members.push_back(s);
    } else {
      members = {0};
      if (p > 1) members.push_back(p - 1);
    }
    return members;
  };
  const auto done = [&](int s) { return pc[s] == programs[s].size(); };
  for (;;) {
    bool progress = false, finished = true;
    for (int s = 0; s < p; ++s) {
      if (done(s)) continue;
      finished = false;
      const PipeInstruction& i = programs[s][pc[s]];
      if (i.is_compute()) {
        const double start = clock[s];
        clock[s] += cost(i);
        replay[s].busy += cost(i);
        replay[s].ops.push_back({i, start, clock[s]});
        ++pc[s];
        progress = true;
      } else if (!i.is_transfer()) {  // a step-wide collective: every member there, then all go on
        const std::vector<int> members = joins(i.op);
        if (std::find(members.begin(), members.end(), s) == members.end()) {
          replay[s].ops.push_back({i, clock[s], clock[s]});
          ++pc[s];
          progress = true;
          continue;
        }
        bool all_there = true;
        double start = 0;
        for (int m : members) {
          all_there = all_there && !done(m) && programs[m][pc[m]].op == i.op;
          if (!done(m)) start = std::max(start, clock[m]);
        }
        if (!all_there) continue;
        for (int m : members) {
          clock[m] = start + cost(i);
          replay[m].ops.push_back({programs[m][pc[m]], start, clock[m]});
          ++pc[m];
        }
        progress = true;
      } else {
        const size_t end = exchange_end(s);
        if (!sends_posted[s]) {
          for (size_t k = pc[s]; k < end; ++k)
            if (const Transfer t = transfer_of(programs[s][k], shape, s); t.send) posted_for[t.peer][t.message] = clock[s];
          sends_posted[s] = true;
          progress = true;
        }
        double arrived = clock[s];
        bool all_arrived = true;
        for (size_t k = pc[s]; k < end && all_arrived; ++k) {
          const Transfer t = transfer_of(programs[s][k], shape, s);
          if (t.send) continue;
          const auto found = posted_for[s].find(t.message);
          all_arrived = found != posted_for[s].end();
          if (all_arrived) arrived = std::max(arrived, found->second + times.transfer);
        }
        if (!all_arrived) continue;
        for (size_t k = pc[s]; k < end; ++k) replay[s].ops.push_back({programs[s][k], clock[s], arrived});
        clock[s] = arrived;
        pc[s] = end;
        sends_posted[s] = false;
        progress = true;
      }
    }
    if (finished) break;
    if (!progress) {
      std::ostringstream out;
      for (int s = 0; s < p; ++s)
        out << "\n  stage " << s << ": " << (done(s) ? std::string("finished") : programs[s][pc[s]].str());
      *stuck = out.str();
      return {};
    }
  }
  for (int s = 0; s < p; ++s) replay[s].finish = clock[s];
  return replay;
}

}  // namespace

void check_pipe_schedule(const std::vector<StageProgram>& programs, const PipeShape& shape) {
  FATHOM_CHECK(static_cast<int>(programs.size()) == shape.stages, "pipeline schedule: ", programs.size(),
               " programs for ", shape.stages, " stages");
  for (int s = 0; s < shape.stages; ++s) check_stage(programs[s], shape, s);
  check_order(programs, shape);
  std::string stuck;
  const bool ran = !execute(programs, shape, OpTimes{}, &stuck).empty();
  FATHOM_CHECK(ran, "pipeline schedule deadlocks (", shape.stages, " stages, ", shape.micro_batches,
               " micro-batches, ", shape.chunks, " chunks); each stage waits at:", stuck);
}

InFlight max_in_flight(const StageProgram& program) {
  InFlight now, most;
  for (const PipeInstruction& i : program) {
    switch (i.op) {
      case Op::Forward: ++now.activations, ++now.weight_gradients; break;
      case Op::Backward: --now.activations, --now.weight_gradients; break;
      case Op::BackwardInput: --now.activations; break;
      case Op::BackwardWeight: --now.weight_gradients; break;
      default: break;
    }
    most.activations = std::max(most.activations, now.activations);
    most.weight_gradients = std::max(most.weight_gradients, now.weight_gradients);
  }
  return most;
}

int activation_bound(PipeScheduleKind kind, const PipeShape& shape, int stage) {
  const int p = shape.stages, m = shape.micro_batches, v = shape.chunks;
  switch (kind) {
    case PipeScheduleKind::GPipe: return m;
    case PipeScheduleKind::OneFOneB:
    case PipeScheduleKind::ZeroBubble: return std::min(p - stage, m);
    case PipeScheduleKind::Interleaved: return std::min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v);
  }
  return 0;
}

std::vector<StageReplay> replay_pipe_schedule(const std::vector<StageProgram>& programs, const PipeShape& shape,
                                              const OpTimes& times) {
  std::string stuck;
  std::vector<StageReplay> replay = execute(programs, shape, times, &stuck);
  FATHOM_CHECK(!replay.empty(), "pipeline schedule deadlocks; each stage waits at:", stuck);
  return replay;
}

std::string gantt_chart(const std::vector<StageReplay>& replay, double unit) {
  FATHOM_CHECK(unit > 0, "gantt_chart: unit must be positive");
  double end = 0;
  for (const StageReplay& stage : replay) end = std::max(end, stage.finish);
  const auto column = [&](double t) { return static_cast<size_t>(std::llround(t / unit)); };
  std::ostringstream out;
  for (size_t s = 0; s < replay.size(); ++s) {
    std::string row(column(end), '.');
    for (const TimedOp& op : replay[s].ops) {
      if (!op.instruction.is_compute()) continue;
      const char letter = op.instruction.op == Op::Forward          ? 'F'
                          : op.instruction.op == Op::BackwardWeight ? 'W'
                          : op.instruction.op == Op::BackwardInput  ? 'B'
                                                                    : 'b';
      const std::string label = letter + std::to_string(op.instruction.micro_batch);
      for (size_t c = column(op.start), k = 0; c < column(op.end) && c < row.size(); ++c, ++k)
        row[c] = k < label.size() ? label[k] : '-';
    }
    out << "stage " << s << " |" << row << "|\n";
  }
  return out.str();
}

}  // namespace fathom::parallel
