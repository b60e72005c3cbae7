// What the communication-compressed optimizers save: bytes each rank sends per optimizer step and
// the step time, AdamW and LAMB beside 1-bit Adam, 0/1 Adam and 1-bit LAMB after their freeze, on
// the small GPT data-parallel over this job's ranks. The bytes come from the comms logger
// (nccl-tests' message sizes, summed over every collective of the measured steps); the time is
// the median step. Run it under mpirun -np 2 (benchmarks/comm/run.sh; onebit_link.sh for a
// bandwidth-limited link).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/data/byte_text_dataset.h"
#include "engine/initialize.h"
#include "models/decoder.h"
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
  models::DecoderConfig model_config = models::DecoderConfig::preset("gpt2-small");
  model_config.vocab_size = ByteTextDataset::kVocabSize;
  std::string text;
  for (int i = 0; text.size() < 400000; ++i) text += "one bit per element, and a scale per tensor " + std::to_string(i) + "\n";
  auto dataset = std::make_shared<ByteTextDataset>(ByteTextDataset::from_string(text, model_config.max_positions));
  const std::string config = R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
      "steps_per_print": 1000000, "comms_logger": {"enabled": true}, "optimizer": )" + optimizer + "}";
  auto model = std::make_shared<models::Decoder>(model_config, 1);
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

struct Entry {
  const char* name;
  const char* optimizer;  // the config's optimizer section
};

// Each compressed optimizer is past its warm-up (its variance frozen) by step kMeasureFrom. The
// table measures communication, not learning: a small lr keeps the variances frozen after so
// short a warm-up (tiny, without bias correction) from blowing the weights up.
constexpr int kMeasureFrom = 8;
const Entry kEntries[] = {
    {"AdamW", R"({"type": "AdamW", "params": {"lr": 1e-5}})"},
    {"Lamb", R"({"type": "Lamb", "params": {"lr": 1e-5}})"},
    {"OneBitAdam", R"({"type": "OneBitAdam", "params": {"lr": 1e-5, "freeze_step": 3, "comm_backend_name": "mpi"}})"},
    {"ZeroOneAdam, sync every step", R"({"type": "ZeroOneAdam", "params": {"lr": 1e-5, "var_freeze_step": 5,
        "var_update_scaler": 16, "comm_backend_name": "mpi"}})"},
    {"ZeroOneAdam, sync every 4", R"({"type": "ZeroOneAdam", "params": {"lr": 1e-5, "var_freeze_step": 5,
        "var_update_scaler": 16, "local_step_scaler": 1, "local_step_clipper": 4, "comm_backend_name": "mpi"}})"},
    {"OneBitLamb", R"({"type": "OneBitLamb", "params": {"lr": 1e-5, "freeze_step": 3, "comm_backend_name": "mpi"}})"},
};
}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  std::vector<Measured> measured;
  for (const Entry& e : kEntries) {
    if (runtime.is_main_process()) std::fprintf(stderr, "measuring %s ...\n", e.name);
    measured.push_back(measure(runtime, e.optimizer, kMeasureFrom, steps));
  }
  if (!runtime.is_main_process()) return 0;
  std::printf("GPT small (3.3M parameters, micro-batch 8 x 256 tokens per rank), %d ranks, %d steps after step %d\n",
              runtime.size(), steps, kMeasureFrom);
  std::printf("%-30s %20s %22s %10s %14s %12s\n", "optimizer", "message bytes/step", "bus bytes/step/rank",
              "step (ms)", "bytes vs AdamW", "time/AdamW");
  const Measured& adam = measured.front();
  for (size_t i = 0; i < measured.size(); ++i) {
    const Measured& m = measured[i];
    std::printf("%-30s %20.0f %22.0f %10.1f %13.1fx %12.2f\n", kEntries[i].name, m.message_bytes, m.bus_bytes,
                m.step_ms, m.bus_bytes > 0 ? adam.bus_bytes / m.bus_bytes : 0.0, m.step_ms / adam.step_ms);
  }
  return 0;
}
