// Per-rank model-state memory and step time of ZeRO stages 0, 1 and 2 for a GPT of ~50M
// parameters, beside the formula values of zero::estimate_model_states (docs/zero_memory.md).
//   mpirun -np N fathom_zero_bench [--f32] [--steps 3] [--json FILE]
// bf16 mixed precision with AdamW by default (--f32: pure f32). Each rank trains on a fixed
// micro-batch of 1 x 128 tokens (weak scaling), gradient accumulation 1, buckets of 5e6
// elements. Per stage: one warm-up step, then `steps` timed steps. Model states are read from
// the allocator's tags after a step — stage 0's gradients, which backward allocates and
// zero_grad releases, at the boundary before the step (as tests/parallel/test_zero_memory.cpp).
// Memory is the largest rank's; times are the slowest rank's median: the whole step and its parts
// (forward; backward with its gradient reduction; engine.step() with the optimizer and all-gather).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "engine/initialize.h"
#include "engine/memory_report.h"
#include "engine/token_dataset.h"
#include "models/gpt.h"
#include "nn/loss.h"
#include "parallel/runtime.h"
#include "zero/memory_estimate.h"

using namespace fathom;

namespace {
constexpr int64_t kMicroBatch = 1, kBlock = 128, kBucket = 5'000'000;

struct Options {
  bool f32 = false;
  int steps = 3;  // timed, after one warm-up step
  std::string json_path;
};

struct Result {
  int stage = 0;
  int64_t parameters = 0;    // Ψ
  ModelStateBytes measured;  // largest rank's, per component
  zero::ModelStateEstimate formula;
  int64_t communication_peak = 0;
  double step_ms = 0, tokens_per_second = 0;
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;  // the step's parts (engine.step(): optimizer_ms)
};

// 8 layers, 8 heads, 640 wide, vocab 16384, 128 positions: 49,957,120 parameters.
models::GPTConfig model_config() {
  models::GPTConfig c;
  c.n_layer = 8;
  c.n_head = 8;
  c.n_embd = 640;
  c.vocab_size = 16384;
  c.block_size = kBlock;
  return c;
}

std::shared_ptr<data::TokenDataset> synthetic_tokens(int64_t samples, int64_t vocab) {
  std::vector<uint16_t> tokens(samples * kBlock + 1);
  uint32_t x = 12345;
  for (uint16_t& t : tokens) t = static_cast<uint16_t>((x = x * 1664525u + 1013904223u) >> 16) % vocab;
  return std::make_shared<data::TokenDataset>(data::TokenDataset::from_tokens(tokens, kBlock, vocab));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int64_t max_over_ranks(distributed::Communicator& world, int64_t bytes) {
  return static_cast<int64_t>(world.all_reduce_scalar(static_cast<double>(bytes), distributed::ReduceOp::Max));
}

Result run_stage(distributed::Runtime& runtime, int stage, const Options& options) {
  distributed::Communicator& world = runtime.world();
  FATHOM_CHECK(model_state_bytes().model_states() == 0, "model states left over from the previous case");
  const models::GPTConfig gpt = model_config();
  auto data = synthetic_tokens(runtime.size() * kMicroBatch * (options.steps + 2), gpt.vocab_size);
  auto model = std::make_shared<models::GPT>(gpt, 1);
  const int64_t psi = model->parameter_count();
  const std::string config = detail::concat(
      R"({"train_micro_batch_size_per_gpu": )", kMicroBatch, R"(, "gradient_accumulation_steps": 1,
      "steps_per_print": 1000000, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
      "bf16": {"enabled": )", options.f32 ? "false" : "true",
      R"(}, "zero_optimization": {"stage": )", stage, R"(, "reduce_bucket_size": )", kBucket,
      R"(, "allgather_bucket_size": )", kBucket, "}}");
  Initialized init = initialize(Config::from_string(config), model, nullptr, data, runtime.world_ptr());
  std::vector<StepReport> reports;
  init.engine->on_step([&](const StepReport& r) { reports.push_back(r); });
  int64_t gradients_before_step = 0;
  for (const data::Batch& batch : *init.loader) {
    if (init.engine->global_steps() == 1) allocator_for(kCPU).stats().reset_peak();  // after the warm-up step
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
  r.formula = zero::estimate_model_states({.parameters = psi,
                                           .world_size = runtime.size(),
                                           .dtype = options.f32 ? DType::F32 : DType::BF16,
                                           .stage = stage,
                                           .optimizer = zero::OptimizerKind::AdamW});
  // The slowest rank's median over the timed steps.
  auto slowest = [&](auto milliseconds) {
    std::vector<double> values;
    for (const StepReport& report : reports) values.push_back(milliseconds(report));
    return world.all_reduce_scalar(median(values), distributed::ReduceOp::Max);
  };
  r.step_ms = slowest([](const StepReport& s) { return s.seconds * 1e3; });
  r.forward_ms = slowest([](const StepReport& s) { return s.forward_ms; });
  r.backward_ms = slowest([](const StepReport& s) { return s.backward_ms; });
  r.optimizer_ms = slowest([](const StepReport& s) { return s.step_ms; });
  r.tokens_per_second = runtime.size() * kMicroBatch * kBlock / (r.step_ms / 1e3);
  return r;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::string today() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

void print_table(int ranks, int64_t psi, const Options& options, const std::vector<Result>& results) {
  std::printf("ZeRO stages 0-2, %d rank%s, GPT %lld parameters, %s + AdamW, micro-batch %lld x %lld tokens per rank, "
              "buckets %lld elements; median of %d steps after 1 warm-up, slowest rank (fwd/bwd/opt: the step's "
              "forward, backward and engine.step() in ms)\n",
              ranks, ranks == 1 ? "" : "s", static_cast<long long>(psi), options.f32 ? "f32" : "bf16 mixed precision",
              static_cast<long long>(kMicroBatch), static_cast<long long>(kBlock), static_cast<long long>(kBucket),
              options.steps);
  std::printf("%5s %8s %8s %8s %10s %15s %14s %10s %16s %10s %9s %7s %7s %7s\n", "stage", "params", "grads", "masters",
              "optimizer", "measured (MiB)", "formula (MiB)", "meas/form", "peak comm (MiB)", "step (ms)", "tokens/s",
              "fwd", "bwd", "opt");
  for (const Result& r : results)
    std::printf("%5d %8.1f %8.1f %8.1f %10.1f %15.1f %14.1f %10.4f %16.1f %10.1f %9.1f %7.0f %7.0f %7.0f\n", r.stage,
                mib(r.measured.parameters), mib(r.measured.gradients), mib(r.measured.master_weights),
                mib(r.measured.optimizer_states), mib(r.measured.model_states()), mib(r.formula.total),
                static_cast<double>(r.measured.model_states()) / static_cast<double>(r.formula.total),
                mib(r.communication_peak), r.step_ms, r.tokens_per_second, r.forward_ms, r.backward_ms, r.optimizer_ms);
}

void write_json(const std::string& path, int ranks, int64_t psi, const Options& options,
                const std::vector<Result>& results) {
  std::ofstream json(path);
  json.precision(10);
  json << "{\"ranks\": " << ranks << ", \"date\": \"" << today() << "\", \"parameters\": " << psi
       << ", \"precision\": \"" << (options.f32 ? "f32" : "bf16") << "\", \"optimizer\": \"AdamW\", \"micro_batch\": "
       << kMicroBatch << ", \"block\": " << kBlock << ", \"bucket_elements\": " << kBucket
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
         << ", \"optimizer_ms\": " << r.optimizer_ms << "}";
  }
  json << "\n]}\n";
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--f32") options.f32 = true;
    else if (arg == "--steps" && has_value) options.steps = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--json" && has_value) options.json_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--f32] [--steps N (timed, default 3)] [--json FILE]\n", argv[0]);
      std::exit(2);
    }
  }
  return options;
}
}  // namespace

int main(int argc, char** argv) {
  distributed::Runtime runtime(argc, argv);
  const Options options = parse(argc, argv);
  std::vector<Result> results;
  for (int stage : {0, 1, 2}) results.push_back(run_stage(runtime, stage, options));
  if (!runtime.is_main_process()) return 0;
  const int64_t psi = results.front().parameters;
  print_table(runtime.size(), psi, options, results);
  if (!options.json_path.empty()) write_json(options.json_path, runtime.size(), psi, options, results);
  return 0;
}
