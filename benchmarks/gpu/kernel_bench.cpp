// fathom_kernel_bench: Fathom's CUDA kernels at GPT-2 124M training sizes (B = 16, T = 1024,
// C = 768, 12 heads, vocabulary 50257), each beside a peer on the same GPU in the same run:
//   - GEMMs (bf16, f32 accumulation) of the QKV, attention-projection, MLP fc/proj and LM-head
//     matmuls over B*T = 16384 rows: forward y = x W^T and the two backward products
//     dx = dy W, dW = dy^T x, in TFLOP/s beside cuBLAS's cublasGemmEx on the same problem;
//   - layernorm, softmax, cross-entropy and AdamW in GB/s (bytes each kernel must read and
//     write, counted below) beside a device-to-device cudaMemcpyAsync moving as many bytes (a
//     copy of S bytes reads S and writes S), with their ratio;
//   - causal attention (B = 16, H = 12, T = 1024, D = 64, bf16) in TFLOP/s, counting the causal
//     half: forward 2 * 2 * B*H*T^2*D / 2, backward 2.5 times that (five products to two); the
//     fused kernel beside the gemm attention kernel (cuBLASLt products around causal_softmax).
// Each row is the median of --runs timed runs (cuda::Event pairs on one stream; a run repeats a
// short kernel to span about 1 ms) after --warmup untimed ones. A kernel that fails (e.g. an op without a CUDA kernel yet) gets an error row; the
// others still run. The table is printed and written to DIR/kernel_bench.md and .tsv (--out DIR).
//
//   fathom_kernel_bench [--out DIR] [--runs N] [--warmup N]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"
#include "core/half.h"
#include "core/tensor.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/matmul.h"
#include "kernels/normalization.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/softmax.h"

using namespace fathom;

namespace {

constexpr int64_t kBatch = 16, kSeq = 1024, kEmbd = 768, kHeads = 12, kVocab = 50257;
constexpr int64_t kRows = kBatch * kSeq;
constexpr int64_t kParams = 124439808;  // GPT-2 124M

struct Options {
  std::string out_dir = ".";
  int runs = 10;
  int warmup = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      FATHOM_CHECK(i + 1 < argc, "fathom_kernel_bench: ", arg, " needs a value");
      return argv[++i];
    };
    if (arg == "--out") o.out_dir = value();
    else if (arg == "--runs") o.runs = std::max(1, std::stoi(value()));
    else if (arg == "--warmup") o.warmup = std::max(0, std::stoi(value()));
    else FATHOM_FAIL("fathom_kernel_bench: unknown argument '", arg, "' (usage: [--out DIR] [--runs N] [--warmup N])");
  }
  return o;
}

void cuda_ok(cudaError_t status, const char* what) {
  FATHOM_CHECK(status == cudaSuccess, what, ": ", cudaGetErrorString(status));
}
void cublas_ok(cublasStatus_t status, const char* what) {
  FATHOM_CHECK(status == CUBLAS_STATUS_SUCCESS, what, " failed with cuBLAS status ", static_cast<int>(status));
}

// Device tensor of uniform values in [-scale, scale) from a fast host generator (the values only
// need to be non-trivial; generating hundreds of millions through the Philox path would dominate).
Tensor random_device(const Shape& shape, DType dtype, uint64_t seed, double scale = 1.0) {
  Tensor host = Tensor::empty(shape, dtype);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&state, scale] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<float>((static_cast<double>(state >> 11) * 0x1.0p-53 * 2 - 1) * scale);
  };
  const int64_t n = host.numel();
  switch (dtype) {
    case DType::F32: {
      float* p = host.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = next();
      break;
    }
    case DType::BF16: {
      BFloat16* p = host.data<BFloat16>();
      for (int64_t i = 0; i < n; ++i) p[i] = BFloat16(next());
      break;
    }
    default: FATHOM_FAIL("random_device: unsupported dtype ", dtype_name(dtype));
  }
  return host.to(Device::cuda(0));
}

Tensor random_targets(int64_t n, int64_t vocab, uint64_t seed) {
  Tensor host = Tensor::empty({n}, DType::I64);
  int64_t* p = host.data<int64_t>();
  uint64_t state = seed | 1;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return host.to(Device::cuda(0));
}

class Timer {
 public:
  Timer(const cuda::Stream& stream, const Options& options) : stream_(stream), options_(options) {}
  // Median milliseconds of one call of fn. A timed run repeats fn enough times to span about a
  // millisecond, so a short kernel is measured back to back rather than with launch gaps.
  double median_ms(const std::function<void()>& fn) {
    for (int i = 0; i < options_.warmup; ++i) fn();
    cuda::Event start(true), stop(true);
    auto time = [&](int reps) {
      start.record(stream_);
      for (int r = 0; r < reps; ++r) fn();
      stop.record(stream_);
      stop.synchronize();
      return static_cast<double>(start.elapsed_ms(stop)) / reps;
    };
    const double estimate = time(1);
    const int reps = static_cast<int>(std::clamp(std::ceil(1.0 / std::max(estimate, 1e-3)), 1.0, 100.0));
    std::vector<double> ms;
    for (int i = 0; i < options_.runs; ++i) ms.push_back(time(reps));
    std::sort(ms.begin(), ms.end());
    const size_t mid = ms.size() / 2;
    return ms.size() % 2 ? ms[mid] : (ms[mid - 1] + ms[mid]) / 2;
  }

 private:
  const cuda::Stream& stream_;
  const Options& options_;
};

struct Row {
  std::string section, name, shape;
  double fathom_ms = 0, peer_ms = 0;
  double fathom_rate = 0, peer_rate = 0;  // TFLOP/s or GB/s
  std::string unit, peer, error;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// C (M x N, row-major) = op(A) op(B) through cublasGemmEx, bf16 in and out, f32 compute: the
// row-major product as the column-major C^T = op(B)^T op(A)^T, like Fathom's own mapping.
void cublas_gemm(cublasHandle_t handle, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                 const void* B, int64_t ldb, void* C, int64_t ldc) {
  const float alpha = 1.0f, beta = 0.0f;
  cublas_ok(cublasGemmEx(handle, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                         static_cast<int>(M), static_cast<int>(K), &alpha, B, CUDA_R_16BF, static_cast<int>(ldb), A,
                         CUDA_R_16BF, static_cast<int>(lda), &beta, C, CUDA_R_16BF, static_cast<int>(ldc),
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
}

void gemm_rows(std::vector<Row>& rows, Timer& timer, cublasHandle_t handle) {
  struct Layer {
    const char* name;
    int64_t in, out;
  };
  const Layer layers[] = {{"qkv (c_attn)", kEmbd, 3 * kEmbd},
                          {"attn proj (c_proj)", kEmbd, kEmbd},
                          {"mlp fc (c_fc)", kEmbd, 4 * kEmbd},
                          {"mlp proj (c_proj)", 4 * kEmbd, kEmbd},
                          {"lm head (wte^T)", kEmbd, kVocab}};
  uint64_t seed = 1;
  for (const Layer& layer : layers) {
    const int64_t R = kRows, in = layer.in, out = layer.out;
    const double flops = 2.0 * R * in * out;
    try {
      const Tensor x = random_device({R, in}, DType::BF16, seed++);
      const Tensor w = random_device({out, in}, DType::BF16, seed++, 1.0 / std::sqrt(static_cast<double>(in)));
      const Tensor dy = random_device({R, out}, DType::BF16, seed++);
      const Tensor y = Tensor::empty({R, out}, DType::BF16, x.device());
      const Tensor dx = Tensor::empty({R, in}, DType::BF16, x.device());
      const Tensor dw = Tensor::empty({out, in}, DType::BF16, x.device());
      struct Product {
        const char* what;
        std::string shape;
        std::function<void()> fathom, peer;
      };
      const std::vector<Product> products = {
          {"forward y = x W^T", "[" + std::to_string(R) + ", " + std::to_string(in) + "] x [" + std::to_string(out) +
                                    ", " + std::to_string(in) + "]^T",
           [&] { matmul_into(y, x, w, false, true); },
           [&] { cublas_gemm(handle, false, true, R, out, in, x.raw_data(), in, w.raw_data(), in, y.raw_data(), out); }},
          {"backward dx = dy W",
           "[" + std::to_string(R) + ", " + std::to_string(out) + "] x [" + std::to_string(out) + ", " +
               std::to_string(in) + "]",
           [&] { matmul_into(dx, dy, w, false, false); },
           [&] { cublas_gemm(handle, false, false, R, in, out, dy.raw_data(), out, w.raw_data(), in, dx.raw_data(), in); }},
          {"backward dW = dy^T x",
           "[" + std::to_string(R) + ", " + std::to_string(out) + "]^T x [" + std::to_string(R) + ", " +
               std::to_string(in) + "]",
           [&] { matmul_into(dw, dy, x, true, false); },
           [&] { cublas_gemm(handle, true, false, out, in, R, dy.raw_data(), out, x.raw_data(), in, dw.raw_data(), in); }},
      };
      for (const Product& p : products) {
        Row row{"GEMM bf16", std::string(layer.name) + " " + p.what, p.shape};
        row.unit = "TFLOP/s";
        row.peer = "cublasGemmEx";
        try {
          row.fathom_ms = timer.median_ms(p.fathom);
          row.peer_ms = timer.median_ms(p.peer);
          row.fathom_rate = flops / (row.fathom_ms * 1e-3) / 1e12;
          row.peer_rate = flops / (row.peer_ms * 1e-3) / 1e12;
        } catch (const std::exception& e) {
          row.error = e.what();
        }
        rows.push_back(row);
      }
    } catch (const std::exception& e) {
      rows.push_back({"GEMM bf16", layer.name, "", 0, 0, 0, 0, "TFLOP/s", "cublasGemmEx", e.what()});
    }
  }
}

// A bandwidth row: `bytes` moved by the kernel, beside a device-to-device copy of bytes / 2.
void bandwidth_row(std::vector<Row>& rows, Timer& timer, const cuda::Stream& stream, const std::string& name,
                   const std::string& shape, double bytes, const std::function<void()>& setup,
                   const std::function<void()>& fn) {
  Row row{"memory-bound", name, shape};
  row.unit = "GB/s";
  row.peer = "D2D cudaMemcpy";
  try {
    setup();
    row.fathom_ms = timer.median_ms(fn);
    row.fathom_rate = bytes / (row.fathom_ms * 1e-3) / 1e9;
    const int64_t half = static_cast<int64_t>(bytes / 2);
    const Tensor src = Tensor::empty({half}, DType::Bool, Device::cuda(0));
    const Tensor dst = Tensor::empty({half}, DType::Bool, Device::cuda(0));
    const auto s = static_cast<cudaStream_t>(stream.handle());
    row.peer_ms = timer.median_ms([&] {
      cuda_ok(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), static_cast<size_t>(half), cudaMemcpyDeviceToDevice, s),
              "cudaMemcpyAsync");
    });
    row.peer_rate = 2.0 * static_cast<double>(half) / (row.peer_ms * 1e-3) / 1e9;
  } catch (const std::exception& e) {
    row.error = e.what();
  }
  rows.push_back(row);
}

void memory_rows(std::vector<Row>& rows, Timer& timer, const cuda::Stream& stream) {
  const Device gpu = Device::cuda(0);
  const double bf = 2, f4 = 4;
  {  // layernorm over GPT-2's residual stream: read x, write y (+ weight, bias, mean, rstd)
    Tensor x, w, b, dy;
    LayerNormOutputs saved;
    const double n = static_cast<double>(kRows) * kEmbd;
    const std::string shape = "[" + std::to_string(kRows) + ", " + std::to_string(kEmbd) + "] bf16";
    auto setup = [&] {
      if (x.defined()) return;
      x = random_device({kRows, kEmbd}, DType::BF16, 101);
      w = random_device({kEmbd}, DType::BF16, 102);
      b = random_device({kEmbd}, DType::BF16, 103);
      dy = random_device({kRows, kEmbd}, DType::BF16, 104);
    };
    bandwidth_row(rows, timer, stream, "layernorm forward", shape, 2 * n * bf + 2 * kRows * f4 + 2 * kEmbd * bf, setup,
                  [&] { layernorm(x, w, b); });
    // read dy, x, mean, rstd, weight; write dx, dweight, dbias
    bandwidth_row(rows, timer, stream, "layernorm backward", shape, 3 * n * bf + 2 * kRows * f4 + 3 * kEmbd * bf,
                  [&] {
                    setup();
                    saved = layernorm(x, w, b);
                  },
                  [&] { layernorm_backward(dy, x, w, saved.mean, saved.rstd); });
  }
  {  // softmax over attention-score rows (B*H*T rows of T = 1024): read, write
    const int64_t N = kBatch * kHeads * kSeq, C = kSeq;
    Tensor x;
    bandwidth_row(rows, timer, stream, "softmax forward", "[" + std::to_string(N) + ", " + std::to_string(C) + "] bf16",
                  2.0 * N * C * bf, [&] { x = random_device({N, C}, DType::BF16, 201); }, [&] { softmax(x); });
  }
  {  // cross-entropy over the LM head's logits: forward reads logits (+ targets, writes lse)
    Tensor logits, targets;
    CrossEntropyOutputs saved;
    Tensor dlogits, dloss;
    const double n = static_cast<double>(kRows) * kVocab;
    const std::string shape = "[" + std::to_string(kRows) + ", " + std::to_string(kVocab) + "] bf16";
    auto setup = [&] {
      if (logits.defined()) return;
      logits = random_device({kRows, kVocab}, DType::BF16, 301, 4.0);
      targets = random_targets(kRows, kVocab, 302);
    };
    bandwidth_row(rows, timer, stream, "cross-entropy forward", shape, n * bf + kRows * (8.0 + f4), setup,
                  [&] { cross_entropy(logits, targets); });
    // read logits, targets, lse; write dlogits
    bandwidth_row(rows, timer, stream, "cross-entropy backward", shape, 2 * n * bf + kRows * (8.0 + f4),
                  [&] {
                    setup();
                    saved = cross_entropy(logits, targets);
                    dlogits = Tensor::empty(logits.sizes(), logits.dtype(), gpu);
                    dloss = Tensor::ones({}, DType::F32, gpu);
                  },
                  [&] {
                    cross_entropy_backward_into(dlogits, dloss, logits, targets, saved.lse,
                                                std::nullopt, kDefaultIgnoreIndex, {}, false);
                  });
  }
  {  // AdamW over GPT-2 124M: read param, grad, m, v (f32); write param, m, v (f32) and the bf16 copy
    Tensor p, g, m, v, copy;
    AdamHyper hyper;
    hyper.weight_decay = 0.1;
    bandwidth_row(rows, timer, stream, "adamw step (+ bf16 copy)", std::to_string(kParams) + " f32 params",
                  kParams * (7 * f4 + bf),
                  [&] {
                    p = random_device({kParams}, DType::F32, 401);
                    g = random_device({kParams}, DType::F32, 402, 1e-2);
                    m = Tensor::zeros({kParams}, DType::F32, gpu);
                    v = Tensor::zeros({kParams}, DType::F32, gpu);
                    copy = Tensor::empty({kParams}, DType::BF16, gpu);
                  },
                  [&] { adam_step(p, g, m, v, hyper, copy); });
  }
}

// The fused (flash-style, SIMT) kernel beside the gemm attention kernel of nn/attention_kernel.h
// (cuBLASLt products around causal_softmax, keeping the T x T probabilities) as the peer.
void attention_rows(std::vector<Row>& rows, Timer& timer) {
  const int64_t head_size = kEmbd / kHeads;
  const Shape shape{kBatch, kHeads, kSeq, head_size};
  const double forward_flops = 2.0 * 2.0 * kBatch * kHeads * static_cast<double>(kSeq) * kSeq * head_size / 2;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_size));
  const std::string shape_text = "[16, 12, 1024, 64] bf16";
  Tensor q, k, v, dout, probs;
  AttentionOutputs saved;
  auto gemm_forward = [&] { return matmul(causal_softmax(matmul(q, k, false, true), scale), v); };
  auto gemm_backward = [&] {
    const Tensor dscores = causal_softmax_backward(matmul(dout, v, false, true), probs, scale);
    matmul(dscores, k);                 // dq
    matmul(dscores, q, true, false);    // dk
    matmul(probs, dout, true, false);   // dv
  };
  auto run = [&](const char* name, double flops, const std::function<void()>& fused,
                 const std::function<void()>& gemm) {
    Row row{"attention", name, shape_text};
    row.unit = "TFLOP/s (causal half)";
    row.peer = "gemm kernel: cuBLASLt + causal_softmax";
    try {
      if (!q.defined()) {
        q = random_device(shape, DType::BF16, 501);
        k = random_device(shape, DType::BF16, 502);
        v = random_device(shape, DType::BF16, 503);
        dout = random_device(shape, DType::BF16, 504);
        saved = causal_attention(q, k, v);
        probs = causal_softmax(matmul(q, k, false, true), scale);
      }
      row.fathom_ms = timer.median_ms(fused);
      row.fathom_rate = flops / (row.fathom_ms * 1e-3) / 1e12;
      row.peer_ms = timer.median_ms(gemm);
      row.peer_rate = flops / (row.peer_ms * 1e-3) / 1e12;
    } catch (const std::exception& e) {
      row.error = e.what();
    }
    rows.push_back(row);
  };
  run("causal attention forward", forward_flops, [&] { causal_attention(q, k, v); }, gemm_forward);
  run("causal attention backward", 2.5 * forward_flops,
      [&] { causal_attention_backward(dout, q, k, v, saved.out, saved.lse); }, gemm_backward);
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\t', ' ');
  std::replace(s.begin(), s.end(), '|', '/');
  return s;
}

void write_tables(const std::vector<Row>& rows, const std::string& header, const Options& options) {
  std::ostringstream md, tsv;
  md << header << "\n";
  md << "| section | kernel | shape | Fathom ms | Fathom | peer | peer ms | peer rate | Fathom / peer |\n";
  md << "|---|---|---|---:|---:|---|---:|---:|---:|\n";
  tsv << "section\tkernel\tshape\tfathom_ms\tfathom_rate\tunit\tpeer\tpeer_ms\tpeer_rate\tratio\terror\n";
  for (const Row& r : rows) {
    const bool peer = r.peer_ms > 0;
    const std::string ratio = peer && r.error.empty() ? fixed(r.fathom_rate / r.peer_rate, 2) : "";
    if (!r.error.empty()) {
      md << "| " << r.section << " | " << r.name << " | " << r.shape << " | error: " << one_line(r.error)
         << " | | | | | |\n";
    } else {
      md << "| " << r.section << " | " << r.name << " | " << r.shape << " | " << fixed(r.fathom_ms, 3) << " | "
         << fixed(r.fathom_rate, 1) << " " << r.unit << " | " << (r.peer.empty() ? "-" : r.peer) << " | "
         << (peer ? fixed(r.peer_ms, 3) : "") << " | " << (peer ? fixed(r.peer_rate, 1) + " " + r.unit : "") << " | "
         << ratio << " |\n";
    }
    tsv << r.section << "\t" << r.name << "\t" << r.shape << "\t" << fixed(r.fathom_ms, 4) << "\t"
        << fixed(r.fathom_rate, 2) << "\t" << r.unit << "\t" << r.peer << "\t" << fixed(r.peer_ms, 4) << "\t"
        << fixed(r.peer_rate, 2) << "\t" << ratio << "\t" << one_line(r.error) << "\n";
  }
  std::printf("%s", md.str().c_str());
  std::filesystem::create_directories(options.out_dir);
  for (const auto& [name, text] : {std::pair{"kernel_bench.md", md.str()}, std::pair{"kernel_bench.tsv", tsv.str()}}) {
    const std::string path = options.out_dir + "/" + name;
    std::ofstream file(path);
    file << text;
    FATHOM_CHECK(file.good(), "fathom_kernel_bench: cannot write ", path);
  }
  std::printf("\nwritten to %s/kernel_bench.md and kernel_bench.tsv\n", options.out_dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    cuda::require_device(0);  // "no CUDA device: ..." on a machine without one
    const cuda::DeviceProperties props = cuda::device_properties(0);
    cuda::Stream stream(0);
    cuda::CurrentStreamGuard on_stream(stream);
    cublasHandle_t handle = nullptr;
    cublas_ok(cublasCreate(&handle), "cublasCreate");
    cublas_ok(cublasSetStream(handle, static_cast<cudaStream_t>(stream.handle())), "cublasSetStream");
    int cublas_version = 0;
    cublas_ok(cublasGetVersion(handle, &cublas_version), "cublasGetVersion");

    std::ostringstream header;
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    header << "fathom_kernel_bench " << date << ": " << props.name << " (sm_" << props.major << props.minor << ", "
           << props.multiprocessors << " SMs), driver " << props.driver_version << ", runtime " << props.runtime_version
           << ", cuBLAS " << cublas_version << ", cuBLASLt " << cublasLtGetVersion() << "; median of "
           << options.runs << " runs after " << options.warmup << " warm-up\n";
    std::printf("%s\n", header.str().c_str());

    Timer timer(stream, options);
    std::vector<Row> rows;
    gemm_rows(rows, timer, handle);
    memory_rows(rows, timer, stream);
    attention_rows(rows, timer);
    cublasDestroy(handle);
    write_tables(rows, header.str(), options);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fathom_kernel_bench: %s\n", e.what());
    return 1;
  }
}
