// Pipeline schedules measured (docs/pipeline_parallel.md, "Benchmark"): a GPT cut into p stages
// (p = the job's ranks, 2 in run.sh: one core per stage) trained under each schedule, beside one
// rank training the same micro-batches, and the schedules replayed at p = 2 and 4.
//   mpirun -np 2 fathom_pipeline_bench [--steps 3] [--layers 8] [--width 256] [--heads 8]
//          [--vocab 4096] [--block 128] [--rows 2]
//
// Table 1, measured: per schedule and micro-batch count m, the median step time, each stage's
// busy time (its forward and backward ops, from the executor's recording) and idle time (the
// rest of the step: waiting for its neighbours, and the transfers), the idle fraction beside the
// schedule's formula (idle / step: (p − 1)/(m + p − 1) for GPipe and 1F1B, (p − 1)/(v·m + p − 1)
// interleaved, (p − 1)/(3m + p − 1) for ZB-H1 when F, B and W take equal time), and each stage's
// peak activation memory in micro-batches (its peak divided by one micro-batch's activations,
// measured under GPipe, which holds all m) beside the schedule's bound.
// Table 2, replayed: every schedule's instruction lists played with the per-op times measured in
// table 1 (the whole model's forward and backward split evenly over p stages), at p = 2 and 4.
// A timeline (text Gantt) of one measured 1F1B step closes it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "benchmarks/common/gpt_bench_setup.h"
#include "core/allocator.h"
#include "core/threads.h"
#include "engine/data/collate.h"
#include "engine/initialize.h"
#include "engine/pipeline_executor.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "parallel/collective_observer.h"
#include "parallel/local_communicator.h"
#include "parallel/pipeline_module.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_transport.h"
#include "parallel/runtime.h"

using namespace fathom;
using parallel::PipeOp;
using parallel::PipeScheduleKind;

namespace {

struct Options {
  int steps = 3;
  int64_t layers = 8, width = 256, heads = 8, vocab = 4096, block = 128, rows = 2;
  bool zero_traffic = false;  // --zero-traffic 1: the ZeRO 1 / 2 table at pipe 2 x data (world / 2)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    FATHOM_CHECK(i + 1 < argc, arg, ": missing value");
    const long long value = std::atoll(argv[++i]);
    if (arg == "--steps") o.steps = static_cast<int>(value);
    else if (arg == "--layers") o.layers = value;
    else if (arg == "--width") o.width = value;
    else if (arg == "--heads") o.heads = value;
    else if (arg == "--vocab") o.vocab = value;
    else if (arg == "--block") o.block = value;
    else if (arg == "--rows") o.rows = value;
    else if (arg == "--zero-traffic") o.zero_traffic = value != 0;
    else FATHOM_FAIL("unknown option ", arg);
  }
  return o;
}

struct Case {
  PipeScheduleKind kind;
  int micro_batches, chunks;
};

// What one case measured on this rank.
struct Measured {
  double step_ms = 0;                  // the median step
  double last_step_ms = 0, busy_ms = 0;  // the recorded (last) step, and its forward and backward ops
  double forward_ms = 0, backward_ms = 0, weight_ms = 0;  // per op, this stage's means
  int64_t peak_activations = 0;
  std::vector<parallel::TimedOp> ops;  // the last step's
};

std::string config_json(const Case& c, const Options& o, int stages, int data = 1, int zero = 0) {
  std::ostringstream json;
  json << R"({"train_batch_size": )" << o.rows * c.micro_batches * data << R"(, "zero_optimization": {"stage": )"
       << zero << R"(}, "gradient_accumulation_steps": )"
       << c.micro_batches << R"(, "steps_per_print": 1000000, "pipeline": {"stages": )" << stages << R"(, "schedule": ")"
       << parallel::pipe_schedule_name(c.kind) << R"(", "virtual_stages": )" << c.chunks
       << R"(}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})";
  return json.str();
}

Batch micro_batch(const TokenDataset& data, int64_t first, int64_t rows) {
  std::vector<int64_t> index(rows);
  std::vector<Sample> samples;
  for (int64_t r = 0; r < rows; ++r) samples.push_back(data.get(index[r] = first + r));
  const Sample stacked = collate(samples, index, samples.front());
  Batch b;
  b.inputs = stacked.input;
  b.targets = stacked.target;
  b.sample_index = Tensor::from_vector(index, {rows});
  return b;
}

Measured run_case(const Case& c, const Options& o, const parallel::ProcessGroups& groups, const TokenDataset& data) {
  const models::DecoderConfig config = bench::gpt_config(o.layers, o.heads, o.width, o.vocab, o.block, true);
  auto stage = std::make_shared<parallel::PipelineModule>(std::make_shared<models::Decoder>(config, 1), groups,
                                                          parallel::PipelineOptions{.chunks = c.chunks});
  Initialized init = initialize(Config::from_string(config_json(c, o, groups.pipeline().size())), stage, nullptr,
                                nullptr, groups);
  auto executor = std::make_unique<PipelineExecutor>(c.kind, *stage, c.micro_batches);
  PipelineExecutor& recorder = *executor;
  init.engine->set_schedule(std::move(executor));
  recorder.set_recording(true);
  Allocator& cpu = allocator_for(kCPU);
  Measured m;
  std::vector<double> steps;
  for (int s = 0; s <= o.steps; ++s) {
    int64_t next_row = 0;
    const NextBatch next = [&] {
      const Batch b = micro_batch(data, next_row, o.rows);
      next_row += o.rows;
      return b;
    };
    cpu.stats().reset_peak();
    const StepReport& report = init.engine->train_batch(next);
    if (s > 0) steps.push_back(report.seconds * 1e3);  // the first is a warm-up
  }
  m.step_ms = bench::median(steps);
  m.peak_activations = cpu.stats().snapshot()[MemoryTag::Activations].peak;
  m.ops = recorder.last_step();
  m.last_step_ms = m.ops.empty() ? 0 : m.ops.back().end;
  std::map<PipeOp, std::pair<double, int>> per_op;
  for (const parallel::TimedOp& op : m.ops)
    if (op.instruction.is_compute()) {
      m.busy_ms += op.end - op.start;
      auto& [total, count] = per_op[op.instruction.op];
      total += op.end - op.start;
      ++count;
    }
  const auto mean = [&](PipeOp op) { return per_op.count(op) ? per_op[op].first / per_op[op].second : 0.0; };
  m.forward_ms = mean(PipeOp::Forward);
  m.backward_ms = std::max(mean(PipeOp::Backward), mean(PipeOp::BackwardInput));
  m.weight_ms = mean(PipeOp::BackwardWeight);
  return m;
}

// The one-rank step of the same micro-batches (gradient accumulation), on the first rank.
double one_rank_ms(const Options& o, int micro_batches, const TokenDataset& data) {
  const models::DecoderConfig config = bench::gpt_config(o.layers, o.heads, o.width, o.vocab, o.block, true);
  auto model = std::make_shared<models::Decoder>(config, 1);
  const Case c{PipeScheduleKind::OneFOneB, micro_batches, 1};
  Initialized init = initialize(Config::from_string(config_json(c, o, 1)), model, nullptr, nullptr,
                                std::make_shared<parallel::LocalCommunicator>());
  std::vector<double> steps;
  for (int s = 0; s <= o.steps; ++s) {
    int64_t next_row = 0;
    const StepReport& report = init.engine->train_batch([&] {
      const Batch b = micro_batch(data, next_row, o.rows);
      next_row += o.rows;
      return b;
    });
    if (s > 0) steps.push_back(report.seconds * 1e3);
  }
  return bench::median(steps);
}

double formula(PipeScheduleKind kind, int p, int m, int v) {
  switch (kind) {
    case PipeScheduleKind::GPipe:
    case PipeScheduleKind::OneFOneB: return (p - 1.0) / (m + p - 1.0);
    case PipeScheduleKind::Interleaved: return (p - 1.0) / (v * m + p - 1.0);
    case PipeScheduleKind::ZeroBubble: return (p - 1.0) / (3.0 * m + p - 1.0);
  }
  return 0;
}

std::string case_name(const Case& c) {
  std::string name = parallel::pipe_schedule_name(c.kind);
  if (c.chunks > 1) name += " v" + std::to_string(c.chunks);
  return name;
}

// A measured step's compute ops of every stage as replay rows for gantt_chart (on the first rank).
std::vector<parallel::StageReplay> gather_timeline(const std::vector<parallel::TimedOp>& mine,
                                                   parallel::Communicator& pipeline) {
  std::ostringstream text;
  for (const parallel::TimedOp& op : mine)
    if (op.instruction.is_compute())
      text << static_cast<int>(op.instruction.op) << ' ' << op.instruction.micro_batch << ' ' << op.start << ' '
           << op.end << '\n';
  std::vector<parallel::StageReplay> stages;
  for (const std::string& stage : parallel::all_gather_text(pipeline, text.str())) {
    parallel::StageReplay replay;
    std::istringstream in(stage);
    int op = 0, micro = 0;
    double start = 0, end = 0;
    while (in >> op >> micro >> start >> end) {
      replay.ops.push_back({{static_cast<PipeOp>(op), micro}, start, end});
      replay.finish = std::max(replay.finish, end);
    }
    stages.push_back(std::move(replay));
  }
  return stages;
}

// Bytes each rank sends in the data-parallel group (nccl-tests' bus bytes), summed.
class DataTraffic final : public parallel::CollectiveObserver {
 public:
  void on_collective(const parallel::CollectiveSpan& span) override {
    if (span.group != "data") return;
    std::lock_guard lock(mutex_);
    bytes_ += static_cast<double>(span.bytes) * parallel::bus_bandwidth_factor(span.kind, span.group_size);
  }
  double take() {
    std::lock_guard lock(mutex_);
    const double b = bytes_;
    bytes_ = 0;
    return b;
  }

 private:
  std::mutex mutex_;
  double bytes_ = 0;
};

// ZeRO's trade with a pipeline, at pipe 2 x data (world / 2), 1F1B: stage 1 reduces the
// accumulated gradients once per step; stage 2 reduce-scatters every micro-batch's (m times the
// bytes) and keeps only its shard. Per stage: data-group MiB sent per step and the gradients'
// peak (allocator tag) during the step.
void zero_traffic(const Options& o, const parallel::Runtime& runtime, const TokenDataset& data) {
  const int world = runtime.size();
  FATHOM_CHECK(world >= 4 && world % 2 == 0, "--zero-traffic needs pipe 2 x data >= 2: run with -np 4");
  const parallel::ProcessGroups groups = runtime.groups(2, 1);
  const int dp = groups.data().size();
  const models::DecoderConfig config = bench::gpt_config(o.layers, o.heads, o.width, o.vocab, o.block, true);
  auto traffic = std::make_shared<DataTraffic>();
  const parallel::CollectiveObservation observing(traffic);
  if (runtime.is_main_process())
    std::printf("\nZeRO with a pipeline at pipe 2 x data %d, 1f1b (oversubscribed ranks: bytes and memory only)\n\n"
                "| ZeRO | m | stage | data-group MiB sent per step | gradients peak MiB |\n|---|---|---|---|---|\n", dp);
  for (int m : {2, 4})
    for (int zero : {1, 2}) {
      const Case c{PipeScheduleKind::OneFOneB, m, 1};
      auto stage = std::make_shared<parallel::PipelineModule>(
          config.layers(), [&](const std::vector<bool>& built) { return std::make_shared<models::Decoder>(config, 1, built); },
          groups);
      Initialized init = initialize(Config::from_string(config_json(c, o, 2, dp, zero)), stage, nullptr, nullptr, groups);
      Allocator& cpu = allocator_for(kCPU);
      double sent = 0;
      int64_t peak = 0;
      for (int s = 0; s < 2; ++s) {  // the second step is measured (the first builds the buckets)
        int64_t next_row = groups.coord().data * o.rows * m;
        traffic->take();
        cpu.stats().reset_peak();
        const int64_t before = cpu.stats().snapshot()[MemoryTag::Gradients].current;
        init.engine->train_batch([&] {
          const Batch b = micro_batch(data, next_row, o.rows);
          next_row += o.rows;
          return b;
        });
        sent = traffic->take();
        peak = cpu.stats().snapshot()[MemoryTag::Gradients].peak - before;
      }
      std::ostringstream line;
      line << sent / (1 << 20) << ' ' << static_cast<double>(peak) / (1 << 20);
      const std::vector<std::string> all = parallel::all_gather_text(runtime.world(), line.str());
      if (runtime.is_main_process())
        for (int stage_rank : {0, world / 2}) {  // data rank 0 of each stage
          double mib = 0, grad = 0;
          std::istringstream(all[stage_rank]) >> mib >> grad;
          std::printf("| %d | %d | %d | %.2f | %.2f |\n", zero, m, stage_rank == 0 ? 0 : 1, mib, grad);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  const Options o = parse(argc, argv);
  set_num_threads(1);  // one core per stage, as each would be one GPU
  const int p = runtime.size();
  const parallel::ProcessGroups groups = runtime.groups(p, 1);
  const auto data = bench::synthetic_tokens(o.rows * 16, o.block, o.vocab);
  const bool main_rank = runtime.is_main_process();
  if (o.zero_traffic) {
    zero_traffic(o, runtime, *data);
    return 0;
  }
  const std::vector<Case> cases = {{PipeScheduleKind::GPipe, 4, 1},       {PipeScheduleKind::OneFOneB, 4, 1},
                                   {PipeScheduleKind::ZeroBubble, 4, 1},  {PipeScheduleKind::Interleaved, 4, 2},
                                   {PipeScheduleKind::GPipe, 8, 1},       {PipeScheduleKind::OneFOneB, 8, 1},
                                   {PipeScheduleKind::ZeroBubble, 8, 1},  {PipeScheduleKind::Interleaved, 8, 2}};
  if (main_rank)
    std::printf("GPT %lld layers x %lld wide, vocab %lld, %lld x %lld tokens per micro-batch, f32 AdamW, %d stages "
                "(partition: parameters), 1 thread per rank; median of %d steps\n\n",
                (long long)o.layers, (long long)o.width, (long long)o.vocab, (long long)o.rows, (long long)o.block, p,
                o.steps);
  std::map<int, double> one_rank;  // by micro-batches; measured on the first rank while the others wait
  std::vector<std::pair<Case, std::vector<Measured>>> results;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    if (k == 0 || cases[k - 1].micro_batches != c.micro_batches) {
      if (main_rank) one_rank[c.micro_batches] = one_rank_ms(o, c.micro_batches, *data);
      runtime.world().barrier();
    }
    const Measured mine = run_case(c, o, groups, *data);
    // Every stage's numbers on the first rank.
    std::ostringstream text;
    text << mine.step_ms << ' ' << mine.last_step_ms << ' ' << mine.busy_ms << ' ' << mine.forward_ms << ' ' << mine.backward_ms << ' '
         << mine.weight_ms << ' ' << mine.peak_activations;
    std::vector<Measured> stages;
    for (const std::string& line : parallel::all_gather_text(groups.pipeline(), text.str())) {
      Measured m;
      std::istringstream in(line);
      in >> m.step_ms >> m.last_step_ms >> m.busy_ms >> m.forward_ms >> m.backward_ms >> m.weight_ms >> m.peak_activations;
      stages.push_back(m);
    }
    stages[groups.pipeline().rank()].ops = mine.ops;
    results.emplace_back(c, std::move(stages));
  }
  // One micro-batch's activations on each stage, from GPipe (which holds all m at its peak).
  std::vector<double> per_micro_batch(p, 0);
  for (const auto& [c, stages] : results)
    if (c.kind == PipeScheduleKind::GPipe && c.micro_batches == 8)
      for (int s = 0; s < p; ++s) per_micro_batch[s] = static_cast<double>(stages[s].peak_activations) / 8;

  if (main_rank) {
    std::printf("Measured at p = %d (busy: the stage's forward and backward ops in the last step, idle: the rest "
                "of that step; idle/step beside the formula; activations: the stage's peak in units of one "
                "micro-batch's (GPipe's peak / m), beside the schedule's bound in micro-batches, interleaved: in "
                "chunks, whose sizes differ)\n\n", p);
    std::printf("| schedule | m | step ms | one rank ms | speed-up |");
    for (int s = 0; s < p; ++s) std::printf(" stage %d busy/idle ms | stage %d idle/step | stage %d act. (bound) |", s, s, s);
    std::printf(" formula idle/step |\n|---|---|---|---|---|");
    for (int s = 0; s < p; ++s) std::printf("---|---|---|");
    std::printf("---|\n");
    for (const auto& [c, stages] : results) {
      const double step = stages[0].step_ms;
      std::printf("| %s | %d | %.1f | %.1f | %.2fx |", case_name(c).c_str(), c.micro_batches, step,
                  one_rank[c.micro_batches], one_rank[c.micro_batches] / step);
      for (int s = 0; s < p; ++s) {
        const double idle = stages[s].last_step_ms - stages[s].busy_ms;
        const parallel::PipeShape shape{p, c.micro_batches, c.chunks};
        std::printf(" %.1f / %.1f | %.3f | %.1f (%d) |", stages[s].busy_ms, idle, idle / stages[s].last_step_ms,
                    per_micro_batch[s] > 0 ? stages[s].peak_activations / per_micro_batch[s] : 0.0,
                    parallel::activation_bound(c.kind, shape, s));
      }
      std::printf(" %.3f |\n", formula(c.kind, p, c.micro_batches, c.chunks));
    }
    // Per-op times of the whole model (summed over the stages of the 1F1B and zero-bubble runs, m = 8).
    double forward = 0, backward = 0, input = 0, weight = 0;
    for (const auto& [c, stages] : results)
      for (const Measured& m : stages) {
        if (c.kind == PipeScheduleKind::OneFOneB && c.micro_batches == 8) forward += m.forward_ms, backward += m.backward_ms;
        if (c.kind == PipeScheduleKind::ZeroBubble && c.micro_batches == 8) input += m.backward_ms, weight += m.weight_ms;
      }
    std::printf("\nPer micro-batch, whole model: forward %.2f ms, backward %.2f ms; zero bubble's B (input "
                "gradients) %.2f ms and W (weight gradients) %.2f ms\n\n", forward, backward, input, weight);
    std::printf("Replayed: idle/step of the instruction lists with those times split evenly over p stages; "
                "\"zero bubble (B = W)\" assumes each half of the backward, the formula's case\n\n");
    std::printf("| p | m | gpipe | 1f1b | interleaved v2 | zero bubble (measured B, W) | zero bubble (B = W) | "
                "formula 1f1b | formula ZB |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int stages : {2, 4})
      for (int m : {4, 8, 16}) {
        const auto idle = [&](PipeScheduleKind kind, int v, const parallel::OpTimes& t) {
          const parallel::PipeShape shape{stages, m, v};
          const auto replay = parallel::replay_pipe_schedule(parallel::make_pipe_schedule(kind, shape), shape, t);
          double total = 0, busy = 0;
          for (const parallel::StageReplay& s : replay) total = std::max(total, s.finish), busy += s.busy;
          return 1.0 - busy / (total * stages);
        };
        const double f = forward / stages, b = backward / stages;
        const parallel::OpTimes whole{f, b, 0, 0, 0}, chunked{f / 2, b / 2, 0, 0, 0};
        const parallel::OpTimes zb{f, input / stages, weight / stages, 0, 0}, split{f, b / 2, b / 2, 0, 0};
        std::printf("| %d | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", stages, m,
                    idle(PipeScheduleKind::GPipe, 1, whole), idle(PipeScheduleKind::OneFOneB, 1, whole),
                    idle(PipeScheduleKind::Interleaved, 2, chunked), idle(PipeScheduleKind::ZeroBubble, 1, zb),
                    idle(PipeScheduleKind::ZeroBubble, 1, split), formula(PipeScheduleKind::OneFOneB, stages, m, 1),
                    (stages - 1.0) * f / (m * (f + b) + (stages - 1.0) * f));  // (p − 1)(F + B − W) idle
      }
  }
  // The timeline of the measured 1F1B step with m = 8.
  for (const auto& [c, stages] : results)
    if (c.kind == PipeScheduleKind::OneFOneB && c.micro_batches == 8) {
      const auto timeline = gather_timeline(stages[groups.pipeline().rank()].ops, groups.pipeline());
      if (main_rank)
        std::printf("\nTimeline of one measured 1f1b step, m = 8 (F forward, b backward of micro-batch k; . idle):\n%s",
                    parallel::gantt_chart(timeline, stages[0].step_ms / 100).c_str());
    }
  return 0;
}
