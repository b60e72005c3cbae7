// Pipeline schedules and partitions without communication: every schedule checked for matched
// transfers and deadlock freedom over many shapes, each stage's order and in-flight micro-batches
// against the schedule's definition, the replayed bubble against the formulas, and the
// partition methods.
#include <string>
#include <vector>

#include "parallel/pipeline_partition.h"
#include "parallel/pipeline_schedule.h"
#include "test_util.h"

using namespace fathom::parallel;
using fathom::testing::error_of;

namespace {

// The compute ops of a stage's program, as "F0 F1 B0 ..." (interleaved: "F0.1" is chunk 1).
std::string compute_order(const StageProgram& program, bool chunks = false) {
  std::string out;
  for (const PipeInstruction& i : program) {
    if (!i.is_compute()) continue;
    const char* letter = i.op == PipeOp::Forward ? "F" : i.op == PipeOp::Backward ? "B" : i.op == PipeOp::BackwardInput ? "b" : "W";
    out += (out.empty() ? "" : " ") + std::string(letter) + std::to_string(i.micro_batch);
    if (chunks) out += "." + std::to_string(i.chunk);
  }
  return out;
}

int count(const StageProgram& program, PipeOp op) {
  int n = 0;
  for (const PipeInstruction& i : program) n += i.op == op;
  return n;
}

}  // namespace

TEST_CASE("pipeline schedules: every transfer matched and no deadlock, p = 2..8 and many m", "[parallel]") {
  for (int p = 1; p <= 8; ++p)
    for (int m : {1, 2, 3, 4, 5, 7, 8, 12, 16}) {
      for (PipeScheduleKind kind : {PipeScheduleKind::GPipe, PipeScheduleKind::OneFOneB, PipeScheduleKind::ZeroBubble}) {
        INFO(pipe_schedule_name(kind) << " p " << p << " m " << m);
        const PipeShape shape{p, m, 1};
        const auto programs = make_pipe_schedule(kind, shape);
        REQUIRE_NOTHROW(check_pipe_schedule(programs, shape));
        for (int s = 0; s < p; ++s) {
          CHECK(count(programs[s], PipeOp::Forward) == m);
          CHECK(count(programs[s], PipeOp::OptimizerStep) == 1);
          // Sends and receives: activations to the next stage, gradients to the previous one.
          CHECK(count(programs[s], PipeOp::SendActivation) == (s < p - 1 ? m : 0));
          CHECK(count(programs[s], PipeOp::RecvActivation) == (s > 0 ? m : 0));
          CHECK(count(programs[s], PipeOp::SendGradient) == (s > 0 ? m : 0));
          CHECK(count(programs[s], PipeOp::RecvGradient) == (s < p - 1 ? m : 0));
          const InFlight most = max_in_flight(programs[s]);
          CHECK(most.activations <= activation_bound(kind, shape, s));
          CHECK(most.activations == activation_bound(kind, shape, s));
          if (kind == PipeScheduleKind::ZeroBubble) {
            CHECK(count(programs[s], PipeOp::BackwardInput) == m);
            CHECK(count(programs[s], PipeOp::BackwardWeight) == m);
            CHECK(most.weight_gradients <= std::min(m, p));  // 1F1B's peak: p micro-batches' activations
            CHECK(most.activations <= std::min(m, p - s));
          } else {
            CHECK(count(programs[s], PipeOp::Backward) == m);
          }
        }
      }
      if (p >= 2 && m % p == 0)
        for (int v : {2, 3}) {
          INFO("interleaved p " << p << " m " << m << " v " << v);
          const PipeShape shape{p, m, v};
          const auto programs = make_pipe_schedule(PipeScheduleKind::Interleaved, shape);
          REQUIRE_NOTHROW(check_pipe_schedule(programs, shape));
          for (int s = 0; s < p; ++s) {
            CHECK(count(programs[s], PipeOp::Forward) == m * v);
            CHECK(count(programs[s], PipeOp::Backward) == m * v);
            CHECK(max_in_flight(programs[s]).activations <= activation_bound(PipeScheduleKind::Interleaved, shape, s));
          }
        }
    }
}

TEST_CASE("pipeline schedules: each stage's order is the schedule's", "[parallel]") {
  const PipeShape shape{4, 6, 1};
  const auto gpipe = make_pipe_schedule(PipeScheduleKind::GPipe, shape);
  CHECK(compute_order(gpipe[2]) == "F0 F1 F2 F3 F4 F5 B0 B1 B2 B3 B4 B5");
  const auto one_f_one_b = make_pipe_schedule(PipeScheduleKind::OneFOneB, shape);
  // p − s − 1 warm-up forwards, then one forward and one backward in turn, then the rest.
  CHECK(compute_order(one_f_one_b[0]) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  CHECK(compute_order(one_f_one_b[1]) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  CHECK(compute_order(one_f_one_b[3]) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  CHECK(max_in_flight(one_f_one_b[0]).activations == 4);
  CHECK(max_in_flight(one_f_one_b[3]).activations == 1);
  // Megatron's interleaved warm-up: 2(p − s − 1) + (v − 1)p forwards on stage s, chunks in
  // groups of p micro-batches.
  const auto interleaved = make_pipe_schedule(PipeScheduleKind::Interleaved, {2, 4, 2});
  CHECK(compute_order(interleaved[0], true) == "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  CHECK(compute_order(interleaved[1], true) == "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
  // Zero bubble: 1F1B's order with backwards split; stage s runs each W s backwards late.
  const auto zero_bubble = make_pipe_schedule(PipeScheduleKind::ZeroBubble, {2, 3, 1});
  CHECK(compute_order(zero_bubble[0]) == "F0 F1 b0 W0 F2 b1 W1 b2 W2");
  CHECK(compute_order(zero_bubble[1]) == "F0 b0 F1 b1 W0 F2 b2 W1 W2");  // W one backward late
}

TEST_CASE("pipeline schedules: the replayed bubble matches the formulas", "[parallel]") {
  for (int p : {2, 4}) {
    for (int m : {4, 8, 16}) {
      INFO("p " << p << " m " << m);
      // F, B and W one unit each: GPipe and 1F1B take (m + p − 1)(F + B + W); idle/ideal = (p − 1)/m.
      const OpTimes unit{1, 1, 1, 0, 0};
      for (PipeScheduleKind kind : {PipeScheduleKind::GPipe, PipeScheduleKind::OneFOneB}) {
        const auto replay = replay_pipe_schedule(make_pipe_schedule(kind, {p, m, 1}), {p, m, 1}, unit);
        for (const StageReplay& stage : replay) {
          CHECK(stage.busy == 3.0 * m);
          CHECK(stage.finish == 3.0 * (m + p - 1));
        }
      }
      // ZB-H1: the Ws fill the rest; idle is (p − 1)(F + B − W), a third of 1F1B's here.
      const auto zb = replay_pipe_schedule(make_pipe_schedule(PipeScheduleKind::ZeroBubble, {p, m, 1}), {p, m, 1}, unit);
      for (const StageReplay& stage : zb) {
        CHECK(stage.busy == 3.0 * m);
        CHECK(stage.finish == 3.0 * m + (p - 1));
      }
      // Interleaved with v chunks: idle/ideal = (p − 1)/(v m) with each chunk's ops 1/v as long.
      if (m % p == 0) {
        const int v = 2;
        const OpTimes chunk{0.5, 0.5, 0.5, 0, 0};
        const auto il = replay_pipe_schedule(make_pipe_schedule(PipeScheduleKind::Interleaved, {p, m, v}), {p, m, v}, chunk);
        double end = 0;
        for (const StageReplay& stage : il) end = std::max(end, stage.finish);
        CHECK(end == 3.0 * m + 3.0 * (p - 1) / v);
      }
    }
  }
}

TEST_CASE("pipeline schedules: the checker finds deadlocks and broken programs", "[parallel]") {
  const PipeShape shape{2, 2, 1};
  auto programs = make_pipe_schedule(PipeScheduleKind::GPipe, shape);
  REQUIRE(programs[0][3] == (PipeInstruction{PipeOp::SendActivation, 1, 0}));
  // Stage 0 waits for micro-batch 0's gradient before sending micro-batch 1's activation, which
  // stage 1 needs before it can run backward: each waits for the other.
  auto stuck = programs;
  const PipeInstruction send = stuck[0][3];
  stuck[0].erase(stuck[0].begin() + 3);
  stuck[0].insert(stuck[0].end() - 2, send);
  CHECK(error_of([&] { check_pipe_schedule(stuck, shape); }).find("pipeline schedule deadlocks (2 stages, 2 micro-batches, 1 chunks); "
                                                                   "each stage waits at:\n  stage 0: recv_gradient(mb 0, chunk 0)\n"
                                                                   "  stage 1: recv_activation(mb 1, chunk 0)") == 0);
  auto missing = programs;
  missing[1].erase(missing[1].begin());  // stage 1 never receives micro-batch 0
  CHECK(error_of([&] { check_pipe_schedule(missing, shape); }) == "stage 1: forward(mb 0, chunk 0) runs before recv_activation");
  auto twice = programs;
  twice[0].insert(twice[0].begin(), PipeInstruction{PipeOp::Forward, 0, 0});
  CHECK(error_of([&] { check_pipe_schedule(twice, shape); }) == "stage 0: forward(mb 0, chunk 0) runs twice");
}

TEST_CASE("pipeline schedules: bad shapes and names are refused", "[parallel]") {
  CHECK(error_of([] { parse_pipe_schedule("1F1B-interleaved"); }) ==
        "unknown pipeline schedule \"1F1B-interleaved\"; use gpipe, 1f1b, interleaved or zero_bubble");
  CHECK(error_of([] { make_pipe_schedule(PipeScheduleKind::Interleaved, {4, 6, 2}); }) ==
        "pipeline schedule \"interleaved\": the micro-batches (6, gradient_accumulation_steps) must be a multiple of "
        "the stages (4), as Megatron's interleaved schedule requires");
  CHECK(error_of([] { make_pipe_schedule(PipeScheduleKind::OneFOneB, {2, 4, 2}); }) ==
        "pipeline schedule \"1f1b\" runs one model chunk per stage, got virtual_stages 2; use \"interleaved\" for several");
  CHECK(parse_pipe_schedule("zero_bubble") == PipeScheduleKind::ZeroBubble);
}

TEST_CASE("pipeline partition: DeepSpeed's methods", "[parallel]") {
  // uniform: the first stages take the remainder.
  CHECK(partition_uniform(10, 4) == std::vector<size_t>{0, 3, 6, 8, 10});
  CHECK(partition_uniform(8, 4) == std::vector<size_t>{0, 2, 4, 6, 8});
  // balanced: the smallest heaviest stage, filled front to back.
  CHECK(partition_balanced({1, 1, 1, 1, 1, 1, 1, 1}, 4) == std::vector<size_t>{0, 2, 4, 6, 8});
  CHECK(partition_balanced({10, 1, 1, 1, 1, 1, 1, 10}, 2) == std::vector<size_t>{0, 4, 8});
  CHECK(partition_balanced({100, 10, 10, 10, 10, 10, 10, 100}, 3) == std::vector<size_t>{0, 1, 7, 8});
  // No stage is left without a layer, even when the front could take everything.
  CHECK(partition_balanced({5, 1, 1, 1, 1, 1}, 3) == std::vector<size_t>{0, 1, 5, 6});
  CHECK(partition_balanced({0, 0, 0, 0}, 4) == std::vector<size_t>{0, 1, 2, 3, 4});

  // A GPT's layers: embedding (heavy), 4 blocks, head (the tied embedding again).
  const std::vector<LayerDescription> gpt = {{"GPTEmbedding", 600}, {"TransformerBlock", 300},
                                             {"TransformerBlock", 300}, {"TransformerBlock", 300},
                                             {"TransformerBlock", 300}, {"GPTHead", 520}};
  CHECK(partition_layers("parameters", gpt, 2) == std::vector<size_t>{0, 3, 6});
  CHECK(partition_layers("uniform", gpt, 4) == std::vector<size_t>{0, 2, 4, 5, 6});
  // type: balance the blocks only; other layers weigh nothing (case-insensitive search).
  CHECK(partition_layers("type:transformerblock", gpt, 2) == std::vector<size_t>{0, 3, 6});
  CHECK(partition_layers("type:Block", gpt, 4) == std::vector<size_t>{0, 2, 3, 4, 6});

  CHECK(error_of([&] { partition_layers("parameters", gpt, 7); }) ==
        "pipeline partition: 7 stages but the model has 6 layers; use at most 6 stages (each stage needs a layer)");
  CHECK(error_of([&] { partition_layers("balanced", gpt, 2); }) ==
        "unknown pipeline partition method \"balanced\"; use \"parameters\", \"uniform\" or \"type:REGEX\" (e.g. "
        "\"type:TransformerBlock\")");
  CHECK(error_of([&] { partition_layers("type:Conv", gpt, 2); }).find("no layer's type matches \"Conv\"") !=
        std::string::npos);
  CHECK(error_of([&] { partition_layers("type:[", gpt, 2); }).find("is not a valid regular expression") !=
        std::string::npos);
}
