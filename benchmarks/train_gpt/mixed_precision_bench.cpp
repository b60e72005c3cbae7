// GPT-2 124M training step on the CPU in f32, bf16 and fp16 (fp32 master weights for the
// 16-bit runs): median ms/step, peak RSS, and the bytes of parameters + gradients from the
// allocator's tags. bf16/fp16 GEMMs run the own 16-bit kernels (vdpbf16ps where the CPU has
// AVX512_BF16; on other CPUs the 16-bit operands are widened to f32 while packing).
//
//   fathom_mixed_precision_bench [--steps N] [--threads N] [--preset gpt2-124M|small]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/generator.h"
#include "core/threads.h"
#include "engine/initialize.h"
#include "engine/token_dataset.h"
#include "models/gpt.h"
#include "nn/loss.h"

using namespace fathom;

namespace {

double peak_rss_gib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);
}

struct Row {
  std::string precision;
  double ms, rss, param_grad_gib;
};

Row run(const std::string& precision, const std::string& preset, int steps) {
  models::GPTConfig config = models::GPTConfig::preset(preset);
  const int64_t batch = 4, seq = 64;
  auto model = std::make_shared<models::GPT>(config, 1);
  std::string text = R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}})";
  if (precision == "bf16") text += R"(, "bf16": {"enabled": true})";
  if (precision == "fp16") text += R"(, "fp16": {"enabled": true, "initial_scale_power": 8})";
  text += "}";
  Initialized init = initialize(Config::from_string(text), model);
  Generator gen(2);
  const Tensor tokens = randint({batch, seq + 1}, gen, 0, config.vocab_size);
  const Tensor inputs = tokens.narrow(1, 0, seq).contiguous(), targets = tokens.narrow(1, 1, seq).contiguous();
  std::vector<double> times;
  int64_t param_grad = 0;
  for (int step = 0; step < steps + 2; ++step) {
    const auto start = std::chrono::steady_clock::now();
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(inputs)), targets));
    const MemorySnapshot mem = memory_snapshot();  // gradients are all alive here
    param_grad = mem[MemoryTag::Parameters].current + mem[MemoryTag::Gradients].current;
    init.engine->step();
    if (step >= 2)
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return {precision, times[times.size() / 2], peak_rss_gib(), static_cast<double>(param_grad) / (1u << 30)};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 3;
  std::string preset = "gpt2-124M";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--steps" && i + 1 < argc) steps = std::stoi(argv[++i]);
    else if (arg == "--threads" && i + 1 < argc) set_num_threads(std::stoi(argv[++i]));
    else if (arg == "--preset" && i + 1 < argc) preset = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--threads N] [--preset gpt2-124M|small]\n", argv[0]);
      return 2;
    }
  }
  std::printf("GPT %s training step (batch 4 x seq 64, AdamW), %d threads\n\n", preset.c_str(), num_threads());
  std::printf("| precision | ms/step | vs f32 | peak RSS GiB (process so far) | params + grads GiB |\n|---|---|---|---|---|\n");
  double f32_ms = 0;
  for (const char* precision : {"f32", "bf16", "fp16"}) {
    const Row r = run(precision, preset, steps);
    if (r.precision == "f32") f32_ms = r.ms;
    std::printf("| %s | %.1f | %.2fx | %.2f | %.2f |\n", r.precision.c_str(), r.ms, f32_ms / r.ms, r.rss, r.param_grad_gib);
    std::fflush(stdout);
  }
  return 0;
}
