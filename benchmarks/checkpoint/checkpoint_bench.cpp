// Checkpoint save and load time and bytes per rank for a GPT (by default ~50M parameters, the
// model of benchmarks/zero) at ZeRO stages 0-3 (docs/checkpoints.md).
//   mpirun -np N fathom_checkpoint_bench [--dir /tmp/fathom_ckpt_bench] [--repeats 3] [--f32]
//          [--stages 0,1,2,3] [--layers 8] [--width 640] [--heads 8] [--vocab 16384] [--block 128]
// bf16 mixed precision with AdamW by default (--f32: pure f32). Per stage: initialize, one
// training step (so the optimizer's states exist), then `repeats` saves, each after a barrier
// into its own tag (so no save pays for removing the previous one), then `repeats` loads of the
// newest. Times are the slowest rank's median; bytes are the size of each rank's
// rank_XXXXX.<kind>.safetensors files (the largest rank's, and the sum over ranks). GB/s per rank: the
// largest rank's bytes over the slowest rank's time. The directory is removed at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "benchmarks/common/gpt_bench_setup.h"
#include "engine/checkpoint/layout.h"
#include "engine/checkpoint/reader.h"
#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "parallel/runtime.h"

using namespace fathom;
namespace fs = std::filesystem;

namespace {
struct Options {
  bool f32 = false;
  int repeats = 3;
  std::string dir = "/tmp/fathom_ckpt_bench";
  std::vector<int> stages = {0, 1, 2, 3};
  // 8 layers, 8 heads, 640 wide, vocab 16384, 128 positions: 49,957,120 parameters.
  int64_t layers = 8, width = 640, heads = 8, vocab = 16384, block = 128;
};

struct Result {
  int stage = 0;
  int64_t parameters = 0;
  int64_t bytes_max = 0, bytes_total = 0;  // rank files: largest rank's, sum over ranks
  double save_ms = 0, load_ms = 0;         // slowest rank's median
};

models::DecoderConfig model_config(const Options& options) {
  return bench::gpt_config(options.layers, options.heads, options.width, options.vocab, options.block, options.f32);
}

// The slowest rank's duration of fn, started after a barrier.
template <typename Fn>
double timed_ms(parallel::Communicator& world, Fn fn) {
  world.barrier();
  const auto start = std::chrono::steady_clock::now();
  fn();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return world.all_reduce_scalar(ms, parallel::ReduceOp::Max);
}

Result run_stage(parallel::Runtime& runtime, int stage, const Options& options) {
  parallel::Communicator& world = runtime.world();
  const std::string dir = (fs::path(options.dir) / ("stage" + std::to_string(stage))).string();
  if (runtime.is_main_process()) fs::remove_all(dir);
  world.barrier();
  const models::DecoderConfig gpt = model_config(options);
  auto data = bench::synthetic_tokens(runtime.size() * 4, gpt.max_positions, gpt.vocab_size);
  auto model = std::make_shared<models::Decoder>(gpt, 1);
  const std::string config = detail::concat(
      R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "steps_per_print": 1000000, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
      "bf16": {"enabled": )", options.f32 ? "false" : "true", R"(}, "zero_optimization": {"stage": )", stage, "}}");
  Initialized init = initialize(Config::from_string(config), model, nullptr, data, runtime.world_ptr());
  for (const Batch& batch : *init.loader) {  // one step: AdamW's moments exist
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs), batch.sample_index),
                                            batch.targets, batch.loss_normaliser));
    init.engine->step();
    break;
  }
  FATHOM_CHECK(init.engine->global_steps() == 1, "the training step did not happen");

  Result r;
  r.stage = stage;
  r.parameters = model->parameter_count();
  std::vector<double> saves, loads;
  std::string tag;
  for (int i = 0; i < options.repeats; ++i) {
    tag = "bench" + std::to_string(i);
    saves.push_back(timed_ms(world, [&] { init.engine->save_checkpoint(dir, tag); }));
  }
  for (int i = 0; i < options.repeats; ++i)
    loads.push_back(timed_ms(world, [&] { init.engine->load_checkpoint(dir); }));  // `latest`: the last tag
  r.save_ms = bench::median(saves);
  r.load_ms = bench::median(loads);
  double bytes = 0;  // this rank's files, every kind
  for (const char* kind : {"param", "master", "optim"})
    if (const fs::path file = fs::path(dir) / tag / checkpoint_file_name(runtime.rank(), kind); fs::exists(file))
      bytes += static_cast<double>(fs::file_size(file));
  r.bytes_max = static_cast<int64_t>(world.all_reduce_scalar(bytes, parallel::ReduceOp::Max));
  r.bytes_total = static_cast<int64_t>(world.all_reduce_scalar(bytes, parallel::ReduceOp::Sum));
  world.barrier();
  if (runtime.is_main_process()) fs::remove_all(dir);
  return r;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

std::vector<int> stages(const std::string& list) {
  std::vector<int> out;
  for (size_t begin = 0; begin <= list.size();) {
    const size_t end = std::min(list.find(',', begin), list.size());
    const int stage = std::atoi(list.substr(begin, end - begin).c_str());
    FATHOM_CHECK(stage >= 0 && stage <= 3 && end > begin, "--stages: expected a list such as 0,1,2,3, got \"", list, "\"");
    out.push_back(stage);
    begin = end + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--f32") options.f32 = true;
    else if (arg == "--dir" && has_value) options.dir = argv[++i];
    else if (arg == "--repeats" && has_value) options.repeats = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--stages" && has_value) options.stages = stages(argv[++i]);
    else if (arg == "--layers" && has_value) options.layers = std::atoll(argv[++i]);
    else if (arg == "--width" && has_value) options.width = std::atoll(argv[++i]);
    else if (arg == "--heads" && has_value) options.heads = std::atoll(argv[++i]);
    else if (arg == "--vocab" && has_value) options.vocab = std::atoll(argv[++i]);
    else if (arg == "--block" && has_value) options.block = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--dir /tmp/fathom_ckpt_bench] [--repeats 3] [--f32] [--stages 0,1,2,3] [--layers 8] "
                   "[--width 640] [--heads 8] [--vocab 16384] [--block 128]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  FATHOM_CHECK(options.vocab <= 65536, "--vocab: the synthetic tokens are 16-bit, at most 65536");
  return options;
}
}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  const Options options = parse(argc, argv);
  std::vector<Result> results;
  for (int stage : options.stages) results.push_back(run_stage(runtime, stage, options));
  runtime.world().barrier();
  if (!runtime.is_main_process()) return 0;
  std::error_code ignored;
  fs::remove(options.dir, ignored);  // only if empty: never another tool's files
  std::printf("checkpoints, %d rank%s, GPT %lld parameters (%lld layers, %lld wide, %lld heads, vocab %lld), %s + AdamW "
              "after 1 step, under %s; median of %d, slowest rank; GB/s per rank: the largest rank file over that "
              "time\n",
              runtime.size(), runtime.size() == 1 ? "" : "s", static_cast<long long>(results.front().parameters),
              static_cast<long long>(options.layers), static_cast<long long>(options.width),
              static_cast<long long>(options.heads), static_cast<long long>(options.vocab),
              options.f32 ? "f32" : "bf16 mixed precision", options.dir.c_str(), options.repeats);
  std::printf("| stage | bytes/rank (MiB) | total (MiB) | save (ms) | save GB/s per rank | load (ms) | load GB/s per rank |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Result& r : results)
    std::printf("| %d | %.1f | %.1f | %.0f | %.2f | %.0f | %.2f |\n", r.stage, mib(r.bytes_max), mib(r.bytes_total),
                r.save_ms, static_cast<double>(r.bytes_max) / (r.save_ms * 1e6), r.load_ms,
                static_cast<double>(r.bytes_max) / (r.load_ms * 1e6));
  return 0;
}
