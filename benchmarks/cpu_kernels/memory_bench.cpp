// Memory-bound CPU kernels beside a plain copy of the same bytes.
//
// For each kernel: the bytes it must move at minimum (each input read once, each output
// written once), its median time over repetitions, the resulting GB/s, and the GB/s of a
// parallel memcpy moving the same number of bytes (half read, half written) at the same
// thread count, measured in the same run. ratio = kernel GB/s / copy GB/s.
//
//   fathom_memory_bench [--threads N] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/threads.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/elementwise.h"
#include "kernels/normalization.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/rotary.h"
#include "kernels/softmax.h"

using namespace fathom;

namespace {

double median_seconds(const std::function<void()>& run, int repetitions) {
  run();  // warm-up: page faults and caches
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// A copy of `bytes` / 2 bytes (so `bytes` move in all), split across the threads like the kernels.
double copy_seconds(double bytes, int repetitions) {
  const size_t half = static_cast<size_t>(bytes / 2);
  std::vector<char> src(half, 1), dst(half, 0);
  const int threads = num_threads();
  return median_seconds(
      [&] {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int t = 0; t < threads; ++t) {
          const size_t begin = half * t / threads, end = half * (t + 1) / threads;
          std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
        }
      },
      repetitions);
}

struct Row {
  std::string kernel, shape;
  double bytes, seconds, copy_seconds;
  double gbps() const { return bytes / seconds / 1e9; }
  double copy_gbps() const { return bytes / copy_seconds / 1e9; }
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "memory_bench.json";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) set_num_threads(std::stoi(argv[++i]));
    else if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  const int reps = 15;
  Generator gen(0);
  std::vector<Row> rows;
  auto measure = [&](const std::string& kernel, const std::string& shape, double bytes, const std::function<void()>& run) {
    rows.push_back({kernel, shape, bytes, median_seconds(run, reps), copy_seconds(bytes, reps)});
    const Row& r = rows.back();
    std::fprintf(stderr, "  %-24s %7.2f GB/s (copy %6.2f GB/s)\n", kernel.c_str(), r.gbps(), r.copy_gbps());
  };

  {  // layernorm forward over GPT-2 activations: 16384 rows x 768
    const int64_t N = 16384, C = 768;
    const Tensor x = uniform({N, C}, gen), w = uniform({C}, gen), b = uniform({C}, gen);
    measure("layernorm forward", "16384x768 f32", 2.0 * N * C * 4 + 2.0 * N * 4, [&] { layernorm(x, w, b); });
  }
  {  // softmax over attention-sized rows
    const int64_t N = 16384, V = 1024;
    const Tensor x = uniform({N, V}, gen, -4, 4);
    measure("softmax", "16384x1024 f32", 2.0 * N * V * 4, [&] { softmax(x); });
  }
  {  // GELU over an MLP activation: 256 x 3072 x 16
    const int64_t n = 256 * 3072 * 16;
    const Tensor x = uniform({n}, gen, -4, 4);
    measure("gelu (tanh)", "12.6M f32", 2.0 * n * 4, [&] { gelu(x); });
  }
  {  // cross-entropy forward + backward on GPT-2 logits: 256 tokens x 50257
    const int64_t N = 256, V = 50257;
    const Tensor logits = uniform({N, V}, gen, -4, 4);
    const Tensor targets = randint({N}, gen, 0, V);
    const Tensor dloss = Tensor::scalar(1.0);
    measure("cross-entropy fwd+bwd", "256x50257 f32", 3.0 * N * V * 4, [&] {
      const CrossEntropyOutputs out = cross_entropy(logits, targets);
      cross_entropy_backward(dloss, logits, targets, out.lse);
    });
  }
  {  // the Llama family's: RoPE on the queries of 16 x 256 tokens, 12 heads of 64
    const int64_t B = 16, H = 12, T = 256, D = 64;
    const Tensor x = uniform({B, H, T, D}, gen, -1, 1), positions = Tensor::arange(T, DType::I64);
    std::vector<float> freq;
    for (int64_t i = 0; i < D / 2; ++i) freq.push_back(std::pow(10000.0f, -2.0f * i / D));
    const Tensor inv_freq = Tensor::from_vector(freq, {D / 2});
    measure("rotary embedding", "16x12x256x64 f32", 2.0 * B * H * T * D * 4,
            [&] { rotary_embedding(x, positions, inv_freq); });
  }
  {  // SwiGLU over a Llama MLP activation: 4096 tokens x 2816
    const int64_t n = 4096 * 2816;
    const Tensor gate = uniform({n}, gen, -4, 4), up = uniform({n}, gen, -4, 4);
    measure("swiglu", "11.5M f32", 3.0 * n * 4, [&] { swiglu(gate, up); });
  }
  {  // grouped-query decoding: one new query per row against 1024 cached positions, 12:4 heads
    const int64_t B = 16, H = 12, KV = 4, T = 1024, D = 64;
    const Tensor q = uniform({B, H, 1, D}, gen, -1, 1), k = uniform({B, KV, T, D}, gen, -1, 1),
                 v = uniform({B, KV, T, D}, gen, -1, 1);
    measure("GQA attention, decode", "16x(12:4)x1024x64 f32", 2.0 * B * KV * T * D * 4,
            [&] { causal_attention(q, k, v, AttentionOptions{}); });
  }
  {  // AdamW over 16M parameters with a bf16 copy
    const int64_t n = 16 << 20;
    const Tensor p = uniform({n}, gen), g = uniform({n}, gen), m = Tensor::zeros({n}), v = Tensor::zeros({n});
    const Tensor copy = Tensor::empty({n}, DType::BF16);
    AdamHyper h;
    h.weight_decay = 0.1;
    measure("adamw (+bf16 copy)", "16.8M params", 7.0 * n * 4 + 2.0 * n, [&] { adam_step(p, g, m, v, h, copy); });
  }

  std::printf("\nMemory-bound kernels, %d thread(s): GB/s = minimum bytes moved / median time\n\n", num_threads());
  std::printf("| kernel | shape | MB moved | ms | GB/s | copy GB/s | ratio |\n|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %.0f | %.2f | %.1f | %.1f | %.2f |\n", r.kernel.c_str(), r.shape.c_str(), r.bytes / 1e6,
                r.seconds * 1e3, r.gbps(), r.copy_gbps(), r.gbps() / r.copy_gbps());
  std::ofstream json(json_path);
  json << "{\"threads\": " << num_threads() << ", \"kernels\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    json << (i ? ", " : "") << "{\"kernel\": \"" << r.kernel << "\", \"shape\": \"" << r.shape
         << "\", \"bytes\": " << r.bytes << ", \"seconds\": " << r.seconds << ", \"gbps\": " << r.gbps()
         << ", \"copy_gbps\": " << r.copy_gbps() << ", \"ratio\": " << r.gbps() / r.copy_gbps() << "}";
  }
  json << "]}\n";
  std::printf("\nJSON: %s\n", json_path.c_str());
  return 0;
}
