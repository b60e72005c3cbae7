// Optimizer offload's parts and the whole, measured one at a time (benchmarks/offload/run.sh
// runs them all and prints one table):
//   fathom_offload_bench adam [--elements N] [--repeats R]
//       the CPU Adam (kernels/cpu/optimizer_cpu.cpp: fp32 master and moments, bf16 copy written in
//       the same pass) in GB/s — 30 bytes per element: read param, grad, exp_avg, exp_avg_sq (16),
//       write param, exp_avg, exp_avg_sq (12), write the bf16 copy (2) — beside a STREAM triad
//       (a = b + s*c, 12 bytes per element) over the same threads, the memory's practical limit;
//   fathom_offload_bench io --dir DIR [--mib M] [--backend auto|io_uring|threads] [--block-size B]
//       [--queue-depth Q] [--threads T]
//       the I/O engine writing then reading one M MiB swap file with O_DIRECT, in GB/s;
//   fathom_offload_bench step [--offload none|cpu|nvme] [--param none|cpu|nvme] [--dir DIR] [--stage 2]
//       [--layers L] [--width W] [--heads H] [--vocab V] [--block T] [--steps S] [--sub-group N]
//       [--pipeline] [--buffer-count C] [--buffer-size E] [--max-in-cpu E]
//       one rank training a bf16 GPT with AdamW, the optimizer (--offload) and at stage 3 the
//       parameters (--param; offload_param's buffer_count, buffer_size, max_in_cpu) offloaded:
//       median step time, the optimizer step's share, bytes the swap files moved per step and the
//       time the step waited for them, peak RSS.
// Each mode prints one line "RESULT {json}". Median of the repeats/steps after one warm-up.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/common/gpt_bench_setup.h"
#include "core/allocator.h"
#include "core/threads.h"
#include "engine/initialize.h"
#include "kernels/optimizer_kernels.h"
#include "nn/deferred_init.h"
#include "nn/loss.h"
#include "offload/host_memory.h"
#include "offload/io_engine.h"
#include "parallel/runtime.h"
#include "zero/sharded_state.h"

using namespace fathom;
using Clock = std::chrono::steady_clock;

namespace {

using Args = std::map<std::string, std::string>;

std::string arg(const Args& args, const std::string& key, const std::string& fallback) {
  const auto it = args.find(key);
  return it == args.end() ? fallback : it->second;
}
int64_t number(const Args& args, const std::string& key, int64_t fallback) {
  return static_cast<int64_t>(std::stod(arg(args, key, std::to_string(fallback))));
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// The host allocators' peaks of live bytes added up (CPU device, host tier, pinned): what the run
// allocated at most, exact to the byte and free of the libraries' resident pages that RSS counts.
int64_t peak_allocated_bytes() {
  return allocator_for(kCPU).stats().snapshot().total.peak +
         offload::host_tier_allocator(false).stats().snapshot().total.peak +
         offload::host_tier_allocator(true).stats().snapshot().total.peak;
}

void adam(const Args& args) {
  const int64_t n = number(args, "--elements", 32 << 20);
  const int repeats = static_cast<int>(number(args, "--repeats", 10));
  Tensor p = Tensor::full({n}, 0.5), g = Tensor::full({n}, 1e-3), m = Tensor::zeros({n}), v = Tensor::zeros({n});
  Tensor copy = Tensor::empty({n}, DType::BF16);
  // With the bf16 copy (what ZeRO's step runs) and without it (PyTorch's work, 28 bytes).
  std::vector<double> adam_times, plain_times, triad_times;
  for (int r = 0; r <= 2 * repeats + 1; ++r) {
    const bool with_copy = r % 2 == 0;
    const auto start = Clock::now();
    adam_step(p, g, m, v, AdamHyper{.lr = 1e-4, .weight_decay = 0.01, .step = r + 1}, with_copy ? copy : Tensor());
    if (r > 1) (with_copy ? adam_times : plain_times).push_back(seconds_since(start));
  }
  // The triad over three of the same arrays, with the same threads.
  float* a = m.data<float>();
  const float* b = p.data<float>();
  const float* c = g.data<float>();
  const int threads = num_threads();
  for (int r = 0; r <= repeats; ++r) {
    const auto start = Clock::now();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 0.5f * c[i];
    if (r > 0) triad_times.push_back(seconds_since(start));
  }
  const double adam_gbs = 30.0 * static_cast<double>(n) / bench::median(adam_times) / 1e9;
  const double triad_gbs = 12.0 * static_cast<double>(n) / bench::median(triad_times) / 1e9;
  std::printf(
      "RESULT {\"mode\": \"adam\", \"elements\": %lld, \"threads\": %d, \"adam_ms\": %.3f, \"adam_gbs\": %.3f, "
      "\"plain_ms\": %.3f, \"triad_gbs\": %.3f}\n",
      static_cast<long long>(n), threads, bench::median(adam_times) * 1e3, adam_gbs, bench::median(plain_times) * 1e3,
      triad_gbs);
}

void io(const Args& args) {
  const std::string dir = arg(args, "--dir", ".");
  const int64_t bytes = number(args, "--mib", 1024) << 20;
  const int repeats = static_cast<int>(number(args, "--repeats", 3));
  offload::AioOptions options{.block_size = number(args, "--block-size", 1 << 20),
                              .queue_depth = number(args, "--queue-depth", 8),
                              .intra_op_parallelism = number(args, "--threads", 1)};
  offload::IoEngine engine(options, offload::parse_io_backend(arg(args, "--backend", "auto")));
  const std::string path = dir + "/fathom_offload_bench.swp";
  offload::DirectFile file(path);
  Tensor buffer;
  {
    offload::HostTierScope tier(false);
    buffer = Tensor::full({bytes / 4}, 1.25);
  }
  std::vector<double> writes, reads;
  for (int r = 0; r <= repeats; ++r) {
    auto start = Clock::now();
    engine.write(file, 0, buffer.raw_data(), bytes).wait();
    ::fdatasync(file.fd());
    if (r > 0) writes.push_back(seconds_since(start));
    start = Clock::now();
    engine.read(file, 0, buffer.raw_data(), bytes).wait();
    if (r > 0) reads.push_back(seconds_since(start));
  }
  std::filesystem::remove(path);
  std::printf(
      "RESULT {\"mode\": \"io\", \"backend\": \"%s\", \"bytes\": %lld, \"block_size\": %lld, \"queue_depth\": "
      "%lld, \"threads\": %lld, \"write_gbs\": %.3f, \"read_gbs\": %.3f}\n",
      offload::io_backend_name(engine.backend()), static_cast<long long>(bytes),
      static_cast<long long>(options.block_size), static_cast<long long>(options.queue_depth),
      static_cast<long long>(options.intra_op_parallelism), bytes / bench::median(writes) / 1e9,
      bytes / bench::median(reads) / 1e9);
}

void step(const Args& args) {
  parallel::Runtime runtime;
  const std::string offload = arg(args, "--offload", "none");
  const int steps = static_cast<int>(number(args, "--steps", 3));
  const models::DecoderConfig gpt =
      bench::gpt_config(number(args, "--layers", 4), number(args, "--heads", 8), number(args, "--width", 512),
                        number(args, "--vocab", 8192), number(args, "--block", 128), false);
  const std::string param = arg(args, "--param", "none");
  std::string placement;
  if (offload != "none")
    placement = detail::concat(
        R"(, "sub_group_size": )", number(args, "--sub-group", 100'000'000), R"(, "offload_optimizer": {"device": ")",
        offload, R"(", "nvme_path": ")", arg(args, "--dir", "."),
        args.count("--pipeline") ? R"(", "buffer_count": 9, "pipeline_read": true, "pipeline_write": true})" : R"("})");
  if (param != "none")
    placement += detail::concat(R"(, "offload_param": {"device": ")", param, R"(", "nvme_path": ")",
                                arg(args, "--dir", "."), R"(", "buffer_count": )", number(args, "--buffer-count", 5),
                                R"(, "buffer_size": )", number(args, "--buffer-size", 100'000'000),
                                R"(, "max_in_cpu": )", number(args, "--max-in-cpu", 1'000'000'000), "}");
  const std::string config = detail::concat(
      R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "steps_per_print": 1000000,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "bf16": {"enabled": true},
      "zero_optimization": {"stage": )",
      number(args, "--stage", 2), R"(, "reduce_bucket_size": 1e7,
      "allgather_bucket_size": 1e7)",
      placement, "}}");
  // Stage 3 builds the model shard by shard (nn::DeferredInit), as fathom-train does.
  std::shared_ptr<models::Decoder> model;
  {
    std::optional<nn::DeferredInit> deferred;
    if (number(args, "--stage", 2) == 3) deferred.emplace();
    model = std::make_shared<models::Decoder>(gpt, 1);
  }
  const int64_t parameters = model->parameter_count();
  Initialized init =
      initialize(Config::from_string(config), model, nullptr,
                 bench::synthetic_tokens(steps + 2, gpt.max_positions, gpt.vocab_size), runtime.world_ptr());
  const zero::OptimizerShard& shard = zero::as_sharded(init.engine->training_state())->optimizer_shard();
  std::vector<double> step_ms, optimizer_ms, read_mb, written_mb, wait_ms;
  for (const Batch& batch : *init.loader) {
    const auto start = Clock::now();
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs), batch.sample_index),
                                            batch.targets, batch.loss_normaliser));
    const auto optimizer_start = Clock::now();
    init.engine->step();
    const zero::IoTotals io = init.engine->last_report().io.value_or(zero::IoTotals{});  // this step's
    if (init.engine->global_steps() > 1) {  // after the warm-up
      step_ms.push_back(seconds_since(start) * 1e3);
      optimizer_ms.push_back(seconds_since(optimizer_start) * 1e3);
      read_mb.push_back(io.bytes_read / 1e6);
      written_mb.push_back(io.bytes_written / 1e6);
      wait_ms.push_back(io.wait_seconds * 1e3);
    }
    if (init.engine->global_steps() == steps + 1) break;
  }
  std::printf(
      "RESULT {\"mode\": \"step\", \"offload\": \"%s\", \"param\": \"%s\", \"stage\": %lld, \"parameters\": %lld, "
      "\"sub_groups\": %zu, "
      "\"step_ms\": %.1f, \"optimizer_ms\": %.1f, \"read_mb\": %.1f, \"written_mb\": %.1f, \"io_wait_ms\": %.1f, "
      "\"peak_rss_mib\": %.1f, \"peak_allocated_mib\": %.1f}\n",
      offload.c_str(), param.c_str(), static_cast<long long>(number(args, "--stage", 2)),
      static_cast<long long>(parameters), shard.sub_groups(), bench::median(step_ms),
      bench::median(optimizer_ms), bench::median(read_mb), bench::median(written_mb), bench::median(wait_ms),
      peak_rss_bytes() / 1048576.0, peak_allocated_bytes() / 1048576.0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fathom_offload_bench adam|io|step [--key value ...] (see the source's first lines)\n");
    return 2;
  }
  Args args;
  for (int i = 2; i < argc; ++i) {
    const std::string key = argv[i];
    args[key] = i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0 ? argv[++i] : "";
  }
  try {
    const std::string mode = argv[1];
    if (mode == "adam")
      adam(args);
    else if (mode == "io")
      io(args);
    else if (mode == "step")
      step(args);
    else
      throw std::runtime_error("unknown mode \"" + mode + "\": expected adam, io or step");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fathom_offload_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
