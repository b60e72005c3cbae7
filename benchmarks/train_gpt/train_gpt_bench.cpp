// One training step (forward + backward + AdamW) of GPT models on the CPU, f32.
//
// For each model: median ms/step over the measured steps (after warm-up), tokens/s, MFU
// against this machine's measured GEMM peak (FLOPs per token = 6N + 6·L·C·T, as llm.c counts
// them), and the process's peak RSS. The PyTorch peer (run.sh) runs the same models and step.
//
//   fathom_train_gpt_bench [--steps N] [--threads N] [--json FILE] [--only small|gpt2-124M]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/threads.h"
#include "kernels/matmul.h"
#include "models/gpt.h"
#include "nn/loss.h"
#include "nn/optimizer_factory.h"

using namespace fathom;

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  std::string name;
  models::GPTConfig config;
  int64_t batch, seq;
};

double peak_rss_gib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is in KiB
}

// The machine's f32 GEMM rate at the current thread count (a large square product).
double measured_gemm_gflops() {
  Generator gen(0);
  const int64_t n = 1536;
  const Tensor a = uniform({n, n}, gen), b = uniform({n, n}, gen);
  Tensor c = Tensor::empty({n, n});
  matmul_into(c, a, b);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    matmul_into(c, a, b);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best;
}

struct Result {
  std::string name;
  int64_t parameters;
  double ms, tokens_per_second, mfu, rss_gib;
};

Result run(const Case& c, int steps, double peak_gflops) {
  models::GPTConfig config = c.config;
  config.block_size = std::max(config.block_size, c.seq);
  auto model = std::make_shared<models::GPT>(config, 1);
  auto optimizer = nn::make_optimizer("AdamW", {{"lr", 1e-4}}, model->named_parameters());
  Generator gen(2);
  const Tensor tokens = randint({c.batch, c.seq + 1}, gen, 0, config.vocab_size);
  const Tensor inputs = tokens.narrow(1, 0, c.seq).contiguous(), targets = tokens.narrow(1, 1, c.seq).contiguous();
  std::vector<double> times;
  for (int step = 0; step < steps + 2; ++step) {  // two warm-up steps
    const auto start = Clock::now();
    model->zero_grad();
    nn::cross_entropy((*model)(autograd::Variable(inputs)), targets).backward();
    optimizer->step();
    if (step >= 2) times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  const double ms = times[times.size() / 2];
  const double n_params = static_cast<double>(model->parameter_count());
  const double flops_per_token = 6 * n_params + 6.0 * config.n_layer * config.n_embd * c.seq;
  const double tokens_per_second = c.batch * c.seq / (ms / 1e3);
  return {c.name, model->parameter_count(), ms, tokens_per_second,
          tokens_per_second * flops_per_token / (peak_gflops * 1e9), peak_rss_gib()};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 5;
  std::string json_path = "train_gpt_bench.json", only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--steps" && i + 1 < argc) steps = std::stoi(argv[++i]);
    else if (arg == "--threads" && i + 1 < argc) set_num_threads(std::stoi(argv[++i]));
    else if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--threads N] [--json FILE] [--only small|gpt2-124M]\n", argv[0]);
      return 2;
    }
  }
  models::GPTConfig small;
  small.n_layer = 4, small.n_head = 4, small.n_embd = 256, small.vocab_size = 512, small.block_size = 128;
  const std::vector<Case> cases = {{"small", small, 8, 128},
                                   {"gpt2-124M", models::GPTConfig::preset("gpt2-124M"), 4, 64}};
  const double peak = measured_gemm_gflops();
  std::printf("Fathom GPT training step, f32, %d threads; measured GEMM peak %.1f GFLOP/s\n\n", num_threads(), peak);
  std::printf("| model | params | batch x seq | ms/step | tokens/s | MFU | peak RSS GiB |\n|---|---|---|---|---|---|---|\n");
  std::vector<Result> results;
  for (const Case& c : cases) {
    if (!only.empty() && c.name != only) continue;
    results.push_back(run(c, steps, peak));
    const Result& r = results.back();
    std::printf("| %s | %.1fM | %lld x %lld | %.1f | %.0f | %.1f%% | %.2f |\n", r.name.c_str(), r.parameters / 1e6,
                (long long)c.batch, (long long)c.seq, r.ms, r.tokens_per_second, 100 * r.mfu, r.rss_gib);
    std::fflush(stdout);
  }
  std::ofstream json(json_path);
  json << "{\"threads\": " << num_threads() << ", \"gemm_peak_gflops\": " << peak << ", \"models\": [";
  for (size_t i = 0; i < results.size(); ++i)
    json << (i ? ", " : "") << "{\"model\": \"" << results[i].name << "\", \"ms_per_step\": " << results[i].ms
         << ", \"tokens_per_second\": " << results[i].tokens_per_second << ", \"mfu\": " << results[i].mfu
         << ", \"peak_rss_gib\": " << results[i].rss_gib << "}";
  json << "]}\n";
  return 0;
}
