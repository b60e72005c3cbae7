// One training step (forward + backward + AdamW through the engine) on the CPU of a GPT or a
// Llama-style decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU, untied), for one model,
// micro-batch and precision per run; benchmarks/train_gpt/run.sh runs the grid and the PyTorch
// peer and prints the tables.
//
// Per run: median ms/step over the measured steps (after the warm-up steps), tokens/s, MFU
// against this machine's GEMM rate measured in the same process (FLOPs per token = 6N +
// 6·L·C·T, as llm.c counts them; an untied input embedding is a lookup and not counted), the step's limit — its GEMM FLOPs at that rate plus AdamW's
// bytes (28 per parameter: f32 weight, gradient and two moments read, three written) at the
// measured copy bandwidth — and the process's peak RSS.
//
//   fathom_train_gpt_bench --model NAME [--batch B] [--seq T] [--precision f32|bf16|fp16]
//                          [--steps N] [--warmup N] [--threads N] [--json FILE]
//   fathom_train_gpt_bench --list      the model names with their shapes
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/threads.h"
#include "engine/initialize.h"
#include "kernels/cpu/gemm.h"
#include "models/model_spec.h"
#include "nn/loss.h"

using namespace fathom;

namespace {

using Clock = std::chrono::steady_clock;

struct ModelShape {
  const char* name;
  int64_t layers, heads, width, vocab;
  int64_t kv_heads = 0, intermediate = 0;  // > 0: a Llama-style decoder
};
// small is the issue's per-op-overhead case; the GPTs share GPT-2's vocabulary, so the scaling
// table sees the LM head's share shrink as the model grows. The Llamas have Llama 2's
// vocabulary, GQA 3:1 and 4:1, and an MLP about 8/3 as wide as the model.
constexpr ModelShape kShapes[] = {{"small", 4, 4, 256, 512},
                                  {"gpt-10M", 4, 3, 192, 50257},
                                  {"gpt-30M", 6, 6, 384, 50257},
                                  {"gpt2-124M", 12, 12, 768, 50257},
                                  {"gpt2-350M", 24, 16, 1024, 50257},
                                  {"llama-100M", 12, 12, 768, 32000, 4, 2048},
                                  {"llama-350M", 24, 16, 1024, 32000, 4, 2816}};

models::ModelSpec spec_of(const ModelShape& shape, int64_t seq) {
  if (shape.kv_heads == 0) {
    models::ModelSpec spec;
    spec.decoder = models::DecoderConfig::gpt2(shape.layers, shape.heads, shape.width, shape.vocab, seq);
    return spec;
  }
  models::ModelSpec spec = models::ModelSpec::preset("llama", "small");
  models::DecoderConfig& c = spec.decoder;
  c.n_layer = shape.layers, c.n_head = shape.heads, c.n_kv_head = shape.kv_heads, c.hidden_size = shape.width;
  c.intermediate_size = shape.intermediate, c.vocab_size = shape.vocab, c.max_positions = seq;
  return spec;
}

const ModelShape& find_shape(const std::string& name) {
  for (const ModelShape& s : kShapes)
    if (name == s.name) return s;
  std::fprintf(stderr, "unknown model \"%s\"; --list shows the names\n", name.c_str());
  std::exit(2);
}

double peak_rss_gib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is in KiB
}

template <typename Fn>
double best_seconds(int repeats, Fn&& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// The GEMM rate of this machine at the current thread count, for the step's precision: a
// 1536-cube product with the kernels the step uses.
double gemm_gflops(bool bf16) {
  const int64_t n = 1536;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  std::vector<BFloat16> a16(a.begin(), a.end()), b16(b.begin(), b.end());
  const double seconds = best_seconds(4, [&] {
    if (bf16)
      kernels::gemm_bf16(false, false, n, n, n, 1.0f, a16.data(), n, b16.data(), n, 0.0f, c.data(), n);
    else
      kernels::gemm_f32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
  return 2.0 * n * n * n / seconds / 1e9;
}

// Copy bandwidth (bytes read + written) over 256 MiB, on the step's threads.
double copy_gbps() {
  const int64_t n = int64_t{32} << 20;
  std::vector<float> src(n, 1.0f), dst(n);
  const int threads = num_threads();
  const double seconds = best_seconds(4, [&] {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t t = 0; t < threads; ++t)
      std::memcpy(dst.data() + n * t / threads, src.data() + n * t / threads,
                  (n * (t + 1) / threads - n * t / threads) * sizeof(float));
  });
  return 2.0 * n * sizeof(float) / seconds / 1e9;
}

struct Result {
  double parameters, ms, tokens_per_second, mfu, limit_ms, gemm_gflops, copy_gbps, rss_gib;
};

Result run(const ModelShape& shape, int64_t batch, int64_t seq, const std::string& precision, int steps,
           int warmup) {
  const models::ModelSpec spec = spec_of(shape, seq);
  auto model = spec.build(1);
  std::string text = "{\"train_micro_batch_size_per_gpu\": " + std::to_string(batch) +
                     R"(, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}})";
  if (precision == "bf16") text += R"(, "bf16": {"enabled": true})";
  if (precision == "fp16") text += R"(, "fp16": {"enabled": true, "initial_scale_power": 8})";
  Initialized init = initialize(Config::from_string(text + "}"), model);
  Generator gen(2);
  const Tensor tokens = randint({batch, seq + 1}, gen, 0, shape.vocab);
  const Tensor inputs = tokens.narrow(1, 0, seq).contiguous(), targets = tokens.narrow(1, 1, seq).contiguous();
  std::vector<double> times;
  for (int step = 0; step < warmup + steps; ++step) {
    const auto start = Clock::now();
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(inputs)), targets));
    init.engine->step();
    if (step >= warmup) times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  Result r;
  r.parameters = static_cast<double>(model->parameter_count());
  const double lookup = spec.decoder.tied_embeddings ? 0.0 : static_cast<double>(shape.vocab * shape.width);  // untied input table
  r.ms = times[times.size() / 2];
  r.rss_gib = peak_rss_gib();
  r.gemm_gflops = gemm_gflops(precision == "bf16");
  r.copy_gbps = copy_gbps();
  const double flops_per_token = 6 * (r.parameters - lookup) + 6.0 * shape.layers * shape.width * seq;
  const double step_flops = flops_per_token * batch * seq;
  r.tokens_per_second = batch * seq / (r.ms / 1e3);
  r.mfu = step_flops / (r.ms / 1e3) / (r.gemm_gflops * 1e9);
  r.limit_ms = 1e3 * (step_flops / (r.gemm_gflops * 1e9) + 28.0 * r.parameters / (r.copy_gbps * 1e9));
  return r;
}

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --model NAME [--batch B] [--seq T] [--precision f32|bf16|fp16] [--steps N] "
               "[--warmup N] [--threads N] [--json FILE]\n       %s --list\n",
               argv0, argv0);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, precision = "f32", json_path;
  int64_t batch = 4, seq = 64;
  int steps = 3, warmup = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--list") {
      for (const ModelShape& s : kShapes) std::printf("%s: %s\n", s.name, spec_of(s, 1024).describe().c_str());
      return 0;
    }
    if (arg == "--model" && has_value) model = argv[++i];
    else if (arg == "--batch" && has_value) batch = std::stoll(argv[++i]);
    else if (arg == "--seq" && has_value) seq = std::stoll(argv[++i]);
    else if (arg == "--precision" && has_value) precision = argv[++i];
    else if (arg == "--steps" && has_value) steps = std::stoi(argv[++i]);
    else if (arg == "--warmup" && has_value) warmup = std::stoi(argv[++i]);
    else if (arg == "--threads" && has_value) set_num_threads(std::stoi(argv[++i]));
    else if (arg == "--json" && has_value) json_path = argv[++i];
    else usage(argv[0]);
  }
  if (model.empty() || batch < 1 || seq < 1 || steps < 1 || warmup < 0 ||
      (precision != "f32" && precision != "bf16" && precision != "fp16"))
    usage(argv[0]);
  const Result r = run(find_shape(model), batch, seq, precision, steps, warmup);
  std::printf("%s %s %lld x %lld, %d threads: %.1f ms/step, %.0f tokens/s, MFU %.1f%% (GEMM %.1f GFLOP/s), "
              "limit %.1f ms (%.0f%% of it), copy %.1f GB/s, peak RSS %.2f GiB\n",
              model.c_str(), precision.c_str(), (long long)batch, (long long)seq, num_threads(), r.ms,
              r.tokens_per_second, 100 * r.mfu, r.gemm_gflops, r.limit_ms, 100 * r.limit_ms / r.ms, r.copy_gbps,
              r.rss_gib);
  if (!json_path.empty()) {
    std::ofstream json(json_path);
    json << "{\"model\": \"" << model << "\", \"precision\": \"" << precision << "\", \"batch\": " << batch
         << ", \"seq\": " << seq << ", \"threads\": " << num_threads() << ", \"parameters\": " << r.parameters
         << ", \"ms_per_step\": " << r.ms << ", \"tokens_per_second\": " << r.tokens_per_second
         << ", \"mfu\": " << r.mfu << ", \"limit_ms\": " << r.limit_ms << ", \"gemm_gflops\": " << r.gemm_gflops
         << ", \"copy_gbps\": " << r.copy_gbps << ", \"peak_rss_gib\": " << r.rss_gib << "}\n";
  }
  return 0;
}
