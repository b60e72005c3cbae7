// Profiling on the GPU: the wall_clock_breakdown timers are CUDA-event times on the compute
// stream (per micro-step, summing to the step's), the flops profiler counts a GPU model's forward
// exactly as the CPU's, and a trace of GPU steps is written with its compute track named for the
// device.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/monitor/flops_profiler.h"
#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "require_cuda.h"

using namespace fathom;
namespace fs = std::filesystem;

namespace {
const Device kGpu = Device::cuda(0);

models::DecoderConfig tiny() {
  models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
  c.vocab_size = 64;
  c.max_positions = 16;
  return c;
}

std::shared_ptr<TokenDataset> tokens() {
  std::vector<uint16_t> ids;
  for (int i = 0; i < 8 * 17 + 1; ++i) ids.push_back(static_cast<uint16_t>(i * 5 % 61));
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(ids, 16, 64));
}

void train(Initialized& init, int64_t steps) {
  for (const Batch& batch : *init.loader) {
    const autograd::Variable out = (*init.engine)(autograd::Variable(batch.inputs.to(kGpu)));
    init.engine->backward(nn::cross_entropy(out, batch.targets.to(kGpu), batch.loss_normaliser));
    init.engine->step();
    if (init.engine->global_steps() == steps) return;
  }
}
}  // namespace

TEST_CASE("GPU step timers: CUDA events per micro-step, summing to the step", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  auto model = std::make_shared<models::Decoder>(tiny(), 1);
  model->to(kGpu);
  const Config config = Config::from_string(R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
      "wall_clock_breakdown": true, "optimizer": {"type": "AdamW"}})");
  Initialized init = initialize(config, model, nullptr, tokens());
  std::vector<StepReport> reports;
  init.engine->on_step([&](const StepReport& r) { reports.push_back(r); });
  train(init, 2);
  REQUIRE(reports.size() == 2);
  const StepReport& r = reports[1];
  REQUIRE(r.micro_step_times.size() == 2);
  CHECK(r.times.forward_ms > 0);
  CHECK(r.times.backward_ms > 0);
  CHECK(r.times.step_ms > 0);
  CHECK(r.micro_step_times[0].forward_ms + r.micro_step_times[1].forward_ms == Approx(r.times.forward_ms));
  CHECK(r.times.backward_inner_ms + r.times.backward_allreduce_ms == Approx(r.times.backward_ms));
}

TEST_CASE("the flops profiler counts a GPU model's forward as the CPU's", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  models::Decoder cpu(tiny(), 1), gpu(tiny(), 1);
  gpu.to(kGpu);
  std::vector<int64_t> ids(2 * 16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 % 64);
  const Tensor batch = Tensor::from_vector(ids, {2, 16});
  FlopsProfiler on_cpu(cpu, {}, {}), on_gpu(gpu, {}, {});
  on_cpu.start();
  cpu(autograd::Variable(batch));
  on_cpu.stop();
  on_gpu.start();
  gpu(autograd::Variable(batch.to(kGpu)));
  on_gpu.stop();
  CHECK(on_gpu.total_macs() == on_cpu.total_macs());
  CHECK(on_gpu.total_flops() == on_cpu.total_flops());
  CHECK(on_gpu.forward_ms() > 0);
}

TEST_CASE("a trace of GPU steps names the device's compute track", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const fs::path dir = fs::temp_directory_path() / "fathom_cuda_trace";
  fs::remove_all(dir);
  auto model = std::make_shared<models::Decoder>(tiny(), 1);
  model->to(kGpu);
  const Config config = Config::from_string(R"({"train_batch_size": 2, "optimizer": {"type": "AdamW"},
      "trace": {"enabled": true, "steps": [1, 2], "output_path": ")" + dir.string() + R"("}})");
  Initialized init = initialize(config, model, nullptr, tokens());
  train(init, 2);
  std::stringstream text;
  text << std::ifstream(dir / "trace.json").rdbuf();
  CHECK(text.str().find("\"compute (cuda:0)\"") != std::string::npos);
  CHECK(text.str().find("model.layers.0.self_attn (DecoderAttention)") != std::string::npos);
}
