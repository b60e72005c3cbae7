// Data-parallel step time of the small GPT, with the gradient all-reduce overlapping backward
// (Fathom's default) and after backward (overlap_comm: false, DeepSpeed's stage-0 behaviour),
// and the fraction of all-reduce time hidden behind backward:
//   hidden = 1 - (communication left after backward, overlapped) / (communication, not overlapped)
// Run it at 1 and 2 processes (benchmarks/comm/run.sh does): the per-rank micro-batch is fixed,
// so the global batch grows with the ranks (weak scaling), as DeepSpeed users scale.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/data/byte_text_dataset.h"
#include "engine/initialize.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "zero/replicated_state.h"
#include "parallel/runtime.h"

using namespace fathom;

namespace {
struct Timing {
  double step_ms = 0, communication_ms = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Timing measure(parallel::Runtime& runtime, bool overlap, int steps) {
  models::DecoderConfig model_config = models::DecoderConfig::preset("gpt2-small");
  model_config.vocab_size = ByteTextDataset::kVocabSize;
  std::string text;
  for (int i = 0; text.size() < 400000; ++i) text += "the engine averages gradients over the ranks " + std::to_string(i) + "\n";
  auto dataset = std::make_shared<ByteTextDataset>(ByteTextDataset::from_string(text, model_config.max_positions));
  const std::string config = std::string(R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "steps_per_print": 1000000,
      "zero_optimization": {"stage": 0, "reduce_bucket_size": 2000000, "overlap_comm": )") +
      (overlap ? "true" : "false") + "}}";
  auto model = std::make_shared<models::Decoder>(model_config, 1);
  Initialized init = initialize(Config::from_string(config), model, nullptr, dataset, runtime.world_ptr());
  std::vector<double> step_ms, communication_ms;
  init.engine->on_step([&](const StepReport& r) { step_ms.push_back(r.seconds * 1e3); });
  const auto* state = dynamic_cast<const zero::ReplicatedState*>(&init.engine->training_state());
  const parallel::GradientReducer* reducer = state ? state->reducer() : nullptr;
  for (const Batch& batch : *init.loader) {
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs), batch.sample_index),
                                            batch.targets, batch.loss_normaliser));
    if (reducer) communication_ms.push_back(reducer->last_communication_seconds() * 1e3);
    init.engine->step();
    if (init.engine->global_steps() >= steps) break;
  }
  // The first steps warm caches and allocators.
  step_ms.erase(step_ms.begin(), step_ms.begin() + std::min<size_t>(2, step_ms.size()));
  if (communication_ms.size() > 2) communication_ms.erase(communication_ms.begin(), communication_ms.begin() + 2);
  Timing t{median(step_ms), median(communication_ms)};
  // Every rank's view: the slowest decides the step.
  t.step_ms = runtime.world().all_reduce_scalar(t.step_ms, parallel::ReduceOp::Max);
  t.communication_ms = runtime.world().all_reduce_scalar(t.communication_ms, parallel::ReduceOp::Max);
  return t;
}
}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  const Timing overlapped = measure(runtime, true, steps);
  const Timing after = measure(runtime, false, steps);
  if (!runtime.is_main_process()) return 0;
  std::printf("DP step, GPT small (micro-batch 8 x 256 tokens per rank), %d rank%s, median of %d steps\n",
              runtime.size(), runtime.size() == 1 ? "" : "s", steps - 2);
  std::printf("%-28s %12s %22s\n", "all-reduce", "step (ms)", "exposed comm (ms)");
  std::printf("%-28s %12.1f %22.1f\n", "overlapped with backward", overlapped.step_ms, overlapped.communication_ms);
  std::printf("%-28s %12.1f %22.1f\n", "after backward", after.step_ms, after.communication_ms);
  if (runtime.size() > 1 && after.communication_ms > 0)
    std::printf("hidden behind backward: %.0f%% of the all-reduce time; step time ratio after/overlapped %.2fx\n",
                100.0 * (1.0 - overlapped.communication_ms / after.communication_ms), after.step_ms / overlapped.step_ms);
  return 0;
}
