// Per-rank model-state memory and step time of ZeRO stages 0-3 for a GPT (by default ~50M
// parameters), beside the formula values of zero::estimate_model_states (docs/zero_memory.md).
//   mpirun -np N fathom_zero_bench [--f32] [--steps 3] [--json FILE] [--stages 0,1,2,3]
//          [--layers 8] [--width 640] [--heads 8] [--vocab 16384] [--block 128] [--bucket 5e6]
//          [--prefetch 5e7] [--persistence 1e5] [--max-live 1e9]
// bf16 mixed precision with AdamW by default (--f32: pure f32); the model is built in that
// dtype (DecoderConfig::dtype), so no f32 copy of a bf16 model exists. Each rank trains on a fixed
// micro-batch of 1 x block tokens (weak scaling), gradient accumulation 1, reduce and all-gather
// buckets of `bucket` elements; stage 3 with DeepSpeed's default stage3_prefetch_bucket_size,
// stage3_param_persistence_threshold and stage3_max_live_parameters unless given. Per stage: one
// warm-up step, then `steps` timed steps. Model states are read from the allocator's tags after
// a step — stage 0's gradients, which backward allocates and zero_grad releases, at the boundary
// before the step (as tests/zero/test_zero_memory.cpp). Memory is the largest rank's; "peak
// live" is the allocator's peak of live bytes over the whole case (model construction,
// initialize, every step); stage 3 also reports the gatherer's peak of gathered parameter
// elements. Times are the slowest rank's median: the whole step and its parts (forward; backward
// with its gradient reduction; engine.step() with the optimizer and all-gather).
// Under FATHOM_CPU_MEMORY_LIMIT_MB an allocation past the cap throws and the job ends through
// MPI_Abort: benchmarks/zero/largest_model.sh reads the exit status.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "benchmarks/common/gpt_bench_setup.h"
#include "engine/initialize.h"
#include "engine/monitor/memory_report.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "parallel/runtime.h"
#include "zero/memory_estimate.h"
#include "zero/sharded_state.h"

using namespace fathom;

namespace {
constexpr int64_t kMicroBatch = 1;

struct Options {
  bool f32 = false;
  int steps = 3;  // timed, after one warm-up step
  std::string json_path;
  std::vector<int> stages = {0, 1, 2, 3};
  // 8 layers, 8 heads, 640 wide, vocab 16384, 128 positions: 49,957,120 parameters.
  int64_t layers = 8, width = 640, heads = 8, vocab = 16384, block = 128;
  int64_t bucket = 5'000'000;
  int64_t prefetch = 50'000'000, persistence = 100'000, max_live = 1'000'000'000;  // DeepSpeed's defaults
};

struct Result {
  int stage = 0;
  int64_t parameters = 0;    // Ψ
  ModelStateBytes measured;  // largest rank's, per component
  zero::ModelStateEstimate formula;
  int64_t communication_peak = 0;
  double step_ms = 0, tokens_per_second = 0;
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;  // the step's parts (engine.step(): optimizer_ms)
  int64_t peak_live = 0;               // allocator's peak of live bytes over the case, largest rank
  int64_t peak_gathered_elements = 0;  // stage 3: the gatherer's peak, largest rank
};

models::DecoderConfig model_config(const Options& options) {
  return bench::gpt_config(options.layers, options.heads, options.width, options.vocab, options.block, options.f32);
}

int64_t max_over_ranks(parallel::Communicator& world, int64_t bytes) {
  return static_cast<int64_t>(world.all_reduce_scalar(static_cast<double>(bytes), parallel::ReduceOp::Max));
}

Result run_stage(parallel::Runtime& runtime, int stage, const Options& options) {
  parallel::Communicator& world = runtime.world();
  FATHOM_CHECK(model_state_bytes().model_states() == 0, "model states left over from the previous case");
  Allocator& cpu = allocator_for(kCPU);
  cpu.stats().reset_peak();
  const models::DecoderConfig gpt = model_config(options);
  auto data = bench::synthetic_tokens(runtime.size() * kMicroBatch * (options.steps + 2), gpt.max_positions, gpt.vocab_size);
  auto model = std::make_shared<models::Decoder>(gpt, 1);
  const int64_t psi = model->parameter_count();
  const std::string config = detail::concat(
      R"({"train_micro_batch_size_per_gpu": )", kMicroBatch, R"(, "gradient_accumulation_steps": 1,
      "steps_per_print": 1000000, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
      "bf16": {"enabled": )", options.f32 ? "false" : "true",
      R"(}, "zero_optimization": {"stage": )", stage, R"(, "reduce_bucket_size": )", options.bucket,
      R"(, "allgather_bucket_size": )", options.bucket, R"(, "stage3_prefetch_bucket_size": )", options.prefetch,
      R"(, "stage3_param_persistence_threshold": )", options.persistence,
      R"(, "stage3_max_live_parameters": )", options.max_live, "}}");
  Initialized init = initialize(Config::from_string(config), model, nullptr, data, runtime.world_ptr());
  std::vector<StepReport> reports;
  init.engine->on_step([&](const StepReport& r) { reports.push_back(r); });
  int64_t gradients_before_step = 0, peak_through_warmup = 0;
  for (const Batch& batch : *init.loader) {
    if (init.engine->global_steps() == 1) {  // after the warm-up step
      peak_through_warmup = cpu.stats().snapshot().total.peak;
      cpu.stats().reset_peak();
    }
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs), batch.sample_index),
                                            batch.targets, batch.loss_normaliser));
    gradients_before_step = model_state_bytes().gradients;
    init.engine->step();
    if (init.engine->global_steps() == options.steps + 1) break;
  }
  FATHOM_CHECK(static_cast<int>(reports.size()) == options.steps + 1, "the data ran out after ", reports.size(),
               " steps");
  reports.erase(reports.begin());  // the warm-up step

  Result r;
  r.stage = stage;
  r.parameters = psi;
  ModelStateBytes m = model_state_bytes();
  if (stage == 0) m.gradients = gradients_before_step;
  r.measured.parameters = max_over_ranks(world, m.parameters);
  r.measured.gradients = max_over_ranks(world, m.gradients);
  r.measured.master_weights = max_over_ranks(world, m.master_weights);
  r.measured.optimizer_states = max_over_ranks(world, m.optimizer_states);
  r.communication_peak = max_over_ranks(world, model_state_bytes(/*peak=*/true).communication);
  r.peak_live = max_over_ranks(world, std::max(peak_through_warmup, cpu.stats().snapshot().total.peak));
  if (const zero::ParameterGatherer* gatherer = stage == 3 ? zero::as_sharded(init.engine->training_state())->gatherer() : nullptr)
    r.peak_gathered_elements = max_over_ranks(world, gatherer->peak_gathered_elements());
  r.formula = zero::estimate_model_states({.parameters = psi,
                                           .world_size = runtime.size(),
                                           .dtype = options.f32 ? DType::F32 : DType::BF16,
                                           .stage = stage,
                                           .optimizer = zero::OptimizerKind::AdamW});
  // The slowest rank's median over the timed steps.
  auto slowest = [&](auto milliseconds) {
    std::vector<double> values;
    for (const StepReport& report : reports) values.push_back(milliseconds(report));
    return world.all_reduce_scalar(bench::median(values), parallel::ReduceOp::Max);
  };
  r.step_ms = slowest([](const StepReport& s) { return s.seconds * 1e3; });
  r.forward_ms = slowest([](const StepReport& s) { return s.times.forward_ms; });
  r.backward_ms = slowest([](const StepReport& s) { return s.times.backward_ms; });
  r.optimizer_ms = slowest([](const StepReport& s) { return s.times.step_ms; });
  r.tokens_per_second = static_cast<double>(runtime.size() * kMicroBatch * gpt.max_positions) / (r.step_ms / 1e3);
  return r;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string today() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

std::string stage_list(const std::vector<Result>& results) {
  std::string list;
  for (const Result& r : results) list += (list.empty() ? "" : ",") + std::to_string(r.stage);
  return list;
}

void print_table(int ranks, int64_t psi, const Options& options, const std::vector<Result>& results) {
  std::printf("ZeRO stages %s, %d rank%s, GPT %lld parameters (%lld layers, %lld wide, %lld heads, vocab %lld), "
              "%s + AdamW, micro-batch %lld x %lld tokens per rank, buckets %lld elements, stage 3 prefetch %lld / "
              "persistence %lld / max live %lld elements; median of %d steps after 1 warm-up, slowest rank (fwd/bwd/opt: "
              "the step's forward, backward and engine.step() in ms); peak live: the allocator's, whole case\n",
              stage_list(results).c_str(), ranks, ranks == 1 ? "" : "s", static_cast<long long>(psi),
              static_cast<long long>(options.layers), static_cast<long long>(options.width),
              static_cast<long long>(options.heads), static_cast<long long>(options.vocab),
              options.f32 ? "f32" : "bf16 mixed precision", static_cast<long long>(kMicroBatch),
              static_cast<long long>(options.block), static_cast<long long>(options.bucket),
              static_cast<long long>(options.prefetch), static_cast<long long>(options.persistence),
              static_cast<long long>(options.max_live), options.steps);
  std::printf("%5s %8s %8s %8s %10s %15s %14s %10s %16s %16s %10s %9s %7s %7s %7s %18s\n", "stage", "params", "grads",
              "masters", "optimizer", "measured (MiB)", "formula (MiB)", "meas/form", "peak comm (MiB)",
              "peak live (MiB)", "step (ms)", "tokens/s", "fwd", "bwd", "opt", "peak gathered");
  for (const Result& r : results) {
    const std::string gathered = r.stage == 3 ? std::to_string(r.peak_gathered_elements) : "-";
    std::printf("%5d %8.1f %8.1f %8.1f %10.1f %15.1f %14.1f %10.4f %16.1f %16.1f %10.1f %9.1f %7.0f %7.0f %7.0f %18s\n",
                r.stage, mib(r.measured.parameters), mib(r.measured.gradients), mib(r.measured.master_weights),
                mib(r.measured.optimizer_states), mib(r.measured.model_states()), mib(r.formula.total),
                static_cast<double>(r.measured.model_states()) / static_cast<double>(r.formula.total),
                mib(r.communication_peak), mib(r.peak_live), r.step_ms, r.tokens_per_second, r.forward_ms,
                r.backward_ms, r.optimizer_ms, gathered.c_str());
  }
}

void write_json(const std::string& path, int ranks, int64_t psi, const Options& options,
                const std::vector<Result>& results) {
  std::ofstream json(path);
  json.precision(10);
  json << "{\"ranks\": " << ranks << ", \"date\": \"" << today() << "\", \"parameters\": " << psi
       << ", \"precision\": \"" << (options.f32 ? "f32" : "bf16") << "\", \"optimizer\": \"AdamW\", \"micro_batch\": "
       << kMicroBatch << ", \"block\": " << options.block << ", \"layers\": " << options.layers
       << ", \"width\": " << options.width << ", \"heads\": " << options.heads << ", \"vocab\": " << options.vocab
       << ", \"bucket_elements\": " << options.bucket << ", \"stage3_prefetch_bucket_size\": " << options.prefetch
       << ", \"stage3_param_persistence_threshold\": " << options.persistence
       << ", \"stage3_max_live_parameters\": " << options.max_live << ", \"memory_limit\": " << cpu_memory_limit()
       << ", \"timed_steps\": " << options.steps << ", \"stages\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    json << (i ? ",\n  " : "\n  ") << "{\"stage\": " << r.stage << ", \"parameters\": " << r.measured.parameters
         << ", \"gradients\": " << r.measured.gradients << ", \"master_weights\": " << r.measured.master_weights
         << ", \"optimizer_states\": " << r.measured.optimizer_states
         << ", \"model_states\": " << r.measured.model_states() << ", \"formula\": {\"parameters\": "
         << r.formula.parameters << ", \"gradients\": " << r.formula.gradients << ", \"master_weights\": "
         << r.formula.master_weights << ", \"optimizer_states\": " << r.formula.optimizer_states
         << ", \"total\": " << r.formula.total << "}, \"communication_peak\": " << r.communication_peak
         << ", \"step_ms\": " << r.step_ms << ", \"tokens_per_second\": " << r.tokens_per_second
         << ", \"forward_ms\": " << r.forward_ms << ", \"backward_ms\": " << r.backward_ms
         << ", \"optimizer_ms\": " << r.optimizer_ms << ", \"peak_live\": " << r.peak_live;
    if (r.stage == 3) json << ", \"peak_gathered_elements\": " << r.peak_gathered_elements;
    json << "}";
  }
  json << "\n]}\n";
}

// A count such as 5e6 or 5000000.
int64_t count(const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  FATHOM_CHECK(*end == '\0' && value >= 0, "expected a count (e.g. 5e6), got \"", text, "\"");
  return static_cast<int64_t>(value);
}

std::vector<int> stages(const std::string& list) {
  std::vector<int> out;
  for (size_t begin = 0; begin <= list.size();) {
    const size_t end = std::min(list.find(',', begin), list.size());
    const int stage = std::atoi(list.substr(begin, end - begin).c_str());
    FATHOM_CHECK(stage >= 0 && stage <= 3 && end > begin, "--stages: expected a list such as 0,1,2,3, got \"", list, "\"");
    out.push_back(stage);
    begin = end + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--f32") options.f32 = true;
    else if (arg == "--steps" && has_value) options.steps = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--json" && has_value) options.json_path = argv[++i];
    else if (arg == "--stages" && has_value) options.stages = stages(argv[++i]);
    else if (arg == "--layers" && has_value) options.layers = count(argv[++i]);
    else if (arg == "--width" && has_value) options.width = count(argv[++i]);
    else if (arg == "--heads" && has_value) options.heads = count(argv[++i]);
    else if (arg == "--vocab" && has_value) options.vocab = count(argv[++i]);
    else if (arg == "--block" && has_value) options.block = count(argv[++i]);
    else if (arg == "--bucket" && has_value) options.bucket = count(argv[++i]);
    else if (arg == "--prefetch" && has_value) options.prefetch = count(argv[++i]);
    else if (arg == "--persistence" && has_value) options.persistence = count(argv[++i]);
    else if (arg == "--max-live" && has_value) options.max_live = count(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--f32] [--steps N (timed, default 3)] [--json FILE] [--stages 0,1,2,3] [--layers 8] "
                   "[--width 640] [--heads 8] [--vocab 16384] [--block 128] [--bucket 5e6] [--prefetch 5e7] "
                   "[--persistence 1e5] [--max-live 1e9]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  FATHOM_CHECK(options.vocab <= 65536, "--vocab: the synthetic tokens are 16-bit, at most 65536");
  return options;
}
}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  const Options options = parse(argc, argv);
  std::vector<Result> results;
  for (int stage : options.stages) results.push_back(run_stage(runtime, stage, options));
  if (!runtime.is_main_process()) return 0;
  const int64_t psi = results.front().parameters;
  print_table(runtime.size(), psi, options, results);
  if (!options.json_path.empty()) write_json(options.json_path, runtime.size(), psi, options, results);
  return 0;
}
