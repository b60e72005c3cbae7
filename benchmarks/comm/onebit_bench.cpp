// What 1-bit Adam saves: bytes each rank sends per optimizer step and the step time, AdamW beside
// OneBitAdam after its freeze, on the small GPT data-parallel over this job's ranks. The bytes
// come from the comms logger (nccl-tests' message sizes, summed over every collective of the
// measured steps); the time is the median step. Run it under mpirun -np 2 (benchmarks/comm/run.sh).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/byte_text_dataset.h"
#include "engine/initialize.h"
#include "models/gpt.h"
#include "nn/loss.h"
#include "parallel/comms_logger.h"
#include "parallel/runtime.h"

using namespace fathom;

namespace {
struct Measured {
  double message_bytes = 0;  // nccl-tests' message sizes, summed: what the collectives were given
  double bus_bytes = 0;      // times each op's bus factor: what each rank's link carries
  double step_ms = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Measured measure(parallel::Runtime& runtime, const std::string& optimizer, int warmup, int steps) {
  models::GPTConfig model_config = models::GPTConfig::preset("small");
  model_config.vocab_size = ByteTextDataset::kVocabSize;
  std::string text;
  for (int i = 0; text.size() < 400000; ++i) text += "one bit per element, and a scale per tensor " + std::to_string(i) + "\n";
  auto dataset = std::make_shared<ByteTextDataset>(ByteTextDataset::from_string(text, model_config.block_size));
  const std::string config = R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
      "steps_per_print": 1000000, "comms_logger": {"enabled": true}, "optimizer": )" + optimizer + "}";
  auto model = std::make_shared<models::GPT>(model_config, 1);
  Initialized init = initialize(Config::from_string(config), model, nullptr, dataset, runtime.world_ptr());
  std::vector<double> step_ms;
  init.engine->on_step([&](const StepReport& r) {
    if (r.step > warmup) step_ms.push_back(r.seconds * 1e3);
  });
  for (const Batch& batch : *init.loader) {
    if (init.engine->global_steps() == warmup) init.engine->comms_logger()->reset();  // count the measured steps only
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs), batch.sample_index),
                                            batch.targets, batch.loss_normaliser));
    init.engine->step();
    if (init.engine->global_steps() >= warmup + steps) break;
  }
  Measured m;
  for (const parallel::CommsRow& row : init.engine->comms_logger()->rows()) {
    const double bytes = static_cast<double>(row.bytes) * static_cast<double>(row.count) / steps;
    m.message_bytes += bytes;
    m.bus_bytes += bytes * (row.mean_ms() > 0 ? row.busbw_gbps() / row.algbw_gbps() : 0.0);
  }
  m.step_ms = median(step_ms);
  m.step_ms = runtime.world().all_reduce_scalar(m.step_ms, parallel::ReduceOp::Max);
  return m;
}
}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  constexpr int kFreeze = 3;  // 1-bit Adam's warm-up, left out of the measured steps
  const Measured adam = measure(runtime, R"({"type": "AdamW", "params": {"lr": 1e-3}})", kFreeze, steps);
  const Measured onebit = measure(
      runtime, R"({"type": "OneBitAdam", "params": {"lr": 1e-3, "freeze_step": 3, "comm_backend_name": "mpi"}})",
      kFreeze, steps);
  if (!runtime.is_main_process()) return 0;
  std::printf("GPT small (3.3M parameters, micro-batch 8 x 256 tokens per rank), %d ranks, %d steps after step %d\n",
              runtime.size(), steps, kFreeze);
  std::printf("%-26s %22s %22s %12s\n", "optimizer", "message bytes / step", "bus bytes / step / rank",
              "step (ms)");
  for (const auto& [name, m] : {std::pair{"AdamW", adam}, std::pair{"OneBitAdam (compressed)", onebit}})
    std::printf("%-26s %22.0f %22.0f %12.1f\n", name, m.message_bytes, m.bus_bytes, m.step_ms);
  if (onebit.bus_bytes > 0)
    std::printf("AdamW / OneBitAdam: message bytes %.1fx, bus bytes %.1fx; step time OneBitAdam / AdamW = %.2f\n",
                adam.message_bytes / onebit.message_bytes, adam.bus_bytes / onebit.bus_bytes,
                onebit.step_ms / adam.step_ms);
  return 0;
}
