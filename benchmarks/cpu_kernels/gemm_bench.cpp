// GEMM benchmark: GFLOP/s of Fathom's CPU GEMM on the matrix products of one GPT-2 124M training
// step (batch 4 x seq 64 = 256 tokens), beside OpenBLAS's cblas_sgemm on the same buffers in the
// same run, at 1 and 2 threads. Prints a Markdown table and writes JSON (argv[1], default
// gemm_bench.json).
//
// For each layer shape (tokens M, in K, out N): forward Y = X W (W stored [K, N]), the input
// gradient dX = dY W^T (transpose_b) and the weight gradient dW = X^T dY (transpose_a).
// Columns: each f32 backend compiled into the library (own kernels at the CPU's best
// instruction set, Eigen when built), OpenBLAS, and the own bf16 kernel (vdpbf16ps where the
// CPU has AVX512_BF16, else bf16 widened to f32 while packing). Each figure is the median of 5
// timed runs of at least 50 ms each. Peak: the measured clock x 32 f32 FLOP per cycle per core.
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/threads.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_backend.h"

namespace {

using fathom::kernels::GemmBackend;
using fathom::kernels::GemmIsa;

struct Case {
  std::string layer, pass;
  bool trans_a, trans_b;
  int64_t M, N, K;
};

std::vector<Case> gpt2_cases() {
  const int64_t tokens = 4 * 64;
  struct Layer {
    const char* name;
    int64_t in, out;
  };
  const Layer layers[] = {{"attn.qkv", 768, 2304},
                          {"attn.proj", 768, 768},
                          {"mlp.fc", 768, 3072},
                          {"mlp.proj", 3072, 768},
                          {"lm_head", 768, 50257}};
  std::vector<Case> cases;
  for (const Layer& l : layers) {
    cases.push_back({l.name, "fwd Y=XW", false, false, tokens, l.out, l.in});
    cases.push_back({l.name, "dX=dY W^T", false, true, tokens, l.in, l.out});
    cases.push_back({l.name, "dW=X^T dY", true, false, l.in, l.out, tokens});
  }
  return cases;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median GFLOP/s of 5 runs; each run repeats `fn` until 50 ms have passed.
double measure_gflops(double flops, const std::function<void()>& fn) {
  fn();  // warm-up: page faults, thread start-up, packing buffers
  std::vector<double> rates;
  for (int run = 0; run < 5; ++run) {
    int calls = 0;
    const double start = seconds_now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = seconds_now() - start;
    } while (elapsed < 0.05);
    rates.push_back(flops * calls / elapsed / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

// FMA throughput with the accumulators in registers: the ceiling a GEMM kernel can approach.
__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iterations) {
  __m256 acc[12];
  for (auto& a : acc) a = _mm256_set1_ps(1.0f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
  float sink = 0;
  for (auto& a : acc) sink += _mm256_cvtss_f32(a);
  return sink;
}

__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iterations) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_set1_ps(1.0f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
  float sink = 0;
  for (auto& a : acc) sink += _mm512_cvtss_f32(a);
  return sink;
}

// The core clock: a chain of dependent 1-cycle integer adds runs one add per cycle.
double measure_ghz() {
  const int64_t iterations = 50'000'000;
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    int64_t x = 0;
    const double start = seconds_now();
    for (int64_t i = 0; i < iterations; ++i)
      asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    best = std::max(best, 4.0 * iterations / (seconds_now() - start) / 1e9);
  }
  return best;
}

// The best of 5 short runs: on a shared machine the best run is the one nothing interrupted.
double peak_gflops(int threads, bool avx512) {
  const int64_t iterations = 10'000'000;
  const double flops_per_thread = 2.0 * 12 * (avx512 ? 16 : 8) * iterations;
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    volatile double sink = 0;
    const double start = seconds_now();
#pragma omp parallel num_threads(threads)
    sink = sink + (avx512 ? fma_loop_avx512(iterations) : fma_loop_avx2(iterations));
    best = std::max(best, flops_per_thread * threads / (seconds_now() - start) / 1e9);
  }
  return best;
}

std::string today() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%d", std::localtime(&now));
  return text;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

struct Row {
  Case c;
  int threads;
  std::vector<std::pair<std::string, double>> gflops;  // column -> GFLOP/s
};

// The bf16 paths this CPU runs, each under the instruction-set flavour that selects it.
std::vector<std::pair<std::string, GemmIsa>> bf16_flavours() {
  namespace fk = fathom::kernels;
  std::vector<std::pair<std::string, GemmIsa>> all;
  if (fk::gemm_isa_supported(GemmIsa::Avx512))
    all.emplace_back(fk::gemm_has_bf16_dot() ? "bf16 vdpbf16ps" : "bf16 widened", GemmIsa::Avx512);
  else
    all.emplace_back("bf16 widened", fk::gemm_isa());
  if (fk::gemm_isa_supported(GemmIsa::Amx)) all.emplace_back("bf16 amx", GemmIsa::Amx);
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fk = fathom::kernels;
  const std::string json_path = argc > 1 ? argv[1] : "gemm_bench.json";
  const GemmIsa isa = fk::gemm_isa();
  const bool avx512 = isa == GemmIsa::Avx512 || isa == GemmIsa::Amx;

  std::vector<GemmBackend> backends;
  for (GemmBackend b : {GemmBackend::Own, GemmBackend::Eigen, GemmBackend::OpenBlas})
    if (fk::gemm_backend_available(b)) backends.push_back(b);
  const GemmBackend default_backend = fk::gemm_backend();

  std::printf("# Fathom GEMM benchmark, %s\n\n", today().c_str());
  std::printf("CPU: %s; own kernels: %s%s; OpenBLAS: %s (core %s)\n", cpu_model().c_str(), fk::gemm_isa_name(isa),
              fk::gemm_has_bf16_dot() ? " + avx512bf16" : "", openblas_get_config(), openblas_get_corename());
  // Peak: 2 FMA pipes x 256 bits (Zen 2-4, Haswell+: 32 f32 FLOP per cycle; AVX-512 on Zen 4 is
  // two 256-bit halves, so the same) at the measured clock, or the FMA loop if it runs faster.
  const double ghz = measure_ghz();
  double peak[3] = {0, 0, 0}, fma_loop[3] = {0, 0, 0};
  for (int threads : {1, 2}) {
    fma_loop[threads] = peak_gflops(threads, avx512);
    peak[threads] = std::max(fma_loop[threads], 32.0 * ghz * threads);
  }
  std::printf("Clock %.2f GHz; peak f32 (32 FLOP/cycle/core): %.1f GFLOP/s at 1 thread, %.1f at 2 threads "
              "(register FMA loop: %.1f, %.1f)\n\n",
              ghz, peak[1], peak[2], fma_loop[1], fma_loop[2]);

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<Row> rows;
  for (const Case& c : gpt2_cases()) {
    const int64_t a_size = c.M * c.K, b_size = c.K * c.N, c_size = c.M * c.N;
    std::vector<float> A(a_size), B(b_size), C(c_size);
    for (float& v : A) v = uniform(rng);
    for (float& v : B) v = uniform(rng);
    std::vector<fathom::BFloat16> A16(A.begin(), A.end()), B16(B.begin(), B.end());
    const int64_t lda = c.trans_a ? c.M : c.K, ldb = c.trans_b ? c.K : c.N;
    const double flops = 2.0 * c.M * c.N * c.K;
    for (int threads : {1, 2}) {
      fathom::set_num_threads(threads);
      openblas_set_num_threads(threads);
      Row row{c, threads, {}};
      for (GemmBackend backend : backends) {
        if (backend == GemmBackend::OpenBlas) continue;  // measured directly as the peer below
        fk::set_gemm_backend(backend);
        row.gflops.emplace_back(fk::gemm_backend_name(backend), measure_gflops(flops, [&] {
                                  fk::gemm_f32(c.trans_a, c.trans_b, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(),
                                               ldb, 0.0f, C.data(), c.N);
                                }));
      }
      row.gflops.emplace_back("openblas", measure_gflops(flops, [&] {
                                cblas_sgemm(CblasRowMajor, c.trans_a ? CblasTrans : CblasNoTrans,
                                            c.trans_b ? CblasTrans : CblasNoTrans, int(c.M), int(c.N), int(c.K), 1.0f,
                                            A.data(), int(lda), B.data(), int(ldb), 0.0f, C.data(), int(c.N));
                              }));
      // bf16 in each way this CPU has: widened to f32 while packing, vdpbf16ps, AMX tiles.
      for (const auto& [name, bf16_isa] : bf16_flavours()) {
        fk::set_gemm_isa(bf16_isa);
        row.gflops.emplace_back(name, measure_gflops(flops, [&] {
                                  fk::gemm_bf16(c.trans_a, c.trans_b, c.M, c.N, c.K, 1.0f, A16.data(), lda,
                                                B16.data(), ldb, 0.0f, C.data(), c.N);
                                }));
      }
      fk::set_gemm_isa(isa);
      rows.push_back(row);
      std::fprintf(stderr, "%s %s t=%d done\n", c.layer.c_str(), c.pass.c_str(), threads);
    }
  }
  fk::set_gemm_backend(default_backend);

  // Table: GFLOP/s per column, then own / OpenBLAS.
  std::printf("| layer | pass | M x N x K | thr |");
  for (const auto& [name, value] : rows[0].gflops) std::printf(" %s |", name.c_str());
  std::printf(" own/openblas | own %% of peak |\n|---|---|---|---|");
  for (size_t i = 0; i < rows[0].gflops.size(); ++i) std::printf("---|");
  std::printf("---|---|\n");
  double sum_ratio[3] = {0, 0, 0};
  int count[3] = {0, 0, 0};
  for (const Row& r : rows) {
    double own = 0, blas = 0;
    for (const auto& [name, value] : r.gflops) {
      if (name == "own") own = value;
      if (name == "openblas") blas = value;
    }
    std::printf("| %s | %s | %lldx%lldx%lld | %d |", r.c.layer.c_str(), r.c.pass.c_str(), (long long)r.c.M,
                (long long)r.c.N, (long long)r.c.K, r.threads);
    for (const auto& [name, value] : r.gflops) std::printf(" %.1f |", value);
    std::printf(" %.2f | %.0f%% |\n", own / blas, 100 * own / peak[r.threads]);
    sum_ratio[r.threads] += own / blas;
    ++count[r.threads];
  }
  for (int t : {1, 2}) std::printf("\nMean own/openblas at %d thread%s: %.3f", t, t > 1 ? "s" : "", sum_ratio[t] / count[t]);
  std::printf("\n");

  std::ofstream json(json_path);
  json << "{\n  \"date\": \"" << today() << "\",\n  \"cpu\": \"" << cpu_model() << "\",\n  \"own_isa\": \""
       << fk::gemm_isa_name(isa) << "\",\n  \"bf16_dot\": " << (fk::gemm_has_bf16_dot() ? "true" : "false")
       << ",\n  \"openblas_config\": \"" << openblas_get_config() << "\",\n  \"openblas_core\": \""
       << openblas_get_corename() << "\",\n  \"peak_gflops\": {\"1\": " << peak[1] << ", \"2\": " << peak[2]
       << "},\n  \"clock_ghz\": " << ghz << ",\n  \"fma_loop_gflops\": {\"1\": " << fma_loop[1] << ", \"2\": "
       << fma_loop[2] << "},\n  \"results\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    json << "    {\"layer\": \"" << r.c.layer << "\", \"pass\": \"" << r.c.pass << "\", \"M\": " << r.c.M
         << ", \"N\": " << r.c.N << ", \"K\": " << r.c.K << ", \"trans_a\": " << (r.c.trans_a ? "true" : "false")
         << ", \"trans_b\": " << (r.c.trans_b ? "true" : "false") << ", \"threads\": " << r.threads
         << ", \"gflops\": {";
    for (size_t j = 0; j < r.gflops.size(); ++j)
      json << (j ? ", " : "") << "\"" << r.gflops[j].first << "\": " << r.gflops[j].second;
    json << "}}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  json << "  ]\n}\n";
  std::printf("JSON: %s\n", json_path.c_str());
  return 0;
}
