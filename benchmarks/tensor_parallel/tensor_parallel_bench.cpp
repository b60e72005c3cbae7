// Tensor parallelism against data parallelism and one rank on the same global batch (one table):
// per-step bytes each rank sends in the tensor-parallel group, measured by observing every
// collective, beside the closed form; step time and peak live memory per rank.
//   mpirun -np N fathom_tensor_parallel_bench [--steps 3] [--layers 4] [--width 256] [--heads 8]
//          [--vocab 8192] [--block 128] [--batch 8]
// N is the tensor- and data-parallel size of the cases (2 by default in run.sh). Every case
// trains a GPT in f32 with AdamW on `batch` sequences of `block` tokens per step (the global
// batch): one rank (a one-process job on rank 0), data N (batch / N per rank), tensor N (the
// whole batch on every rank), tensor N with sequence parallelism, tensor N with activation
// checkpointing, and with partitioned checkpoints. One thread per rank in every case, so each rank is one core (as each
// would be one GPU). Per case: one warm-up step, then `steps` timed; the slowest rank's median step.
//
// The closed form of the tensor group's bytes per rank and step (one micro-batch; s = B·T·C
// elements of 4 bytes, B the rank's batch, an all-reduce sending 2(tp−1)/tp of its bytes per
// rank, an all-gather or reduce-scatter (tp−1)/tp): per layer two all-reduces of s forward and
// two backward (an all-gather and a reduce-scatter each with sequence parallelism: the same
// bytes); the vocabulary-parallel embedding's all-reduce forward and the LM head's input-gradient
// all-reduce backward; the cross-entropy's two all-reduces of B·T values (the rows' largest
// log-sum-exp; the sum of exps, with the targets' summed logit riding along: B·T + 1); with
// activation checkpointing the recomputed
// forward's two all-reduces per layer again, and partitioned (partition_activations) three
// all-gathers of the block input per layer (forward, recompute, its gradient). What the
// measurement adds:
// the scalars (gradient norm, overflow, loss counts) and, with sequence parallelism, the layer
// norms' and biases' gradient sums and the all-gather of the embedding's gradient (its sum is
// all-reduced, then sliced: Megatron reduce-scatters it instead, half an all-reduce less).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "benchmarks/common/gpt_bench_setup.h"
#include "core/allocator.h"
#include "core/threads.h"
#include "engine/initialize.h"
#include "models/gpt.h"
#include "models/gpt_tensor_parallel.h"
#include "nn/loss.h"
#include "parallel/collective_observer.h"
#include "parallel/partitioned_checkpoint.h"
#include "parallel/runtime.h"

using namespace fathom;

namespace {

struct Options {
  int steps = 3;
  int64_t layers = 4, width = 256, heads = 8, vocab = 8192, block = 128, batch = 8;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    FATHOM_CHECK(i + 1 < argc, arg, ": missing value");
    const long long value = std::atoll(argv[++i]);
    if (arg == "--steps")
      o.steps = static_cast<int>(value);
    else if (arg == "--layers")
      o.layers = value;
    else if (arg == "--width")
      o.width = value;
    else if (arg == "--heads")
      o.heads = value;
    else if (arg == "--vocab")
      o.vocab = value;
    else if (arg == "--block")
      o.block = value;
    else if (arg == "--batch")
      o.batch = value;
    else
      FATHOM_FAIL("unknown option ", arg);
  }
  return o;
}

// Bytes each rank sends in collectives of the group named "tensor" (nccl-tests' bus factor).
class TensorGroupTraffic : public parallel::CollectiveObserver {
 public:
  void on_collective(const parallel::CollectiveSpan& span) override {
    if (span.group != "tensor") return;
    std::lock_guard<std::mutex> lock(mutex_);
    bytes_ += static_cast<double>(span.bytes) * parallel::bus_bandwidth_factor(span.kind, span.group_size);
    ++collectives_;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    bytes_ = 0;
    collectives_ = 0;
  }
  double bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
  }
  int64_t collectives() {
    std::lock_guard<std::mutex> lock(mutex_);
    return collectives_;
  }

 private:
  std::mutex mutex_;
  double bytes_ = 0;
  int64_t collectives_ = 0;
};

struct Case {
  std::string name;
  int tensor = 1, data = 1;
  bool sequence_parallel = false, checkpointing = false, partition_activations = false;
};

struct Result {
  Case c;
  double step_ms = 0, peak_mib = 0, step_peak_mib = 0, sent_per_step = 0, closed_form = 0;
  int64_t collectives_per_step = 0;
};

// The closed form above, bytes per rank and step.
double closed_form_bytes(const Case& c, const Options& o) {
  if (c.tensor == 1) return 0;
  const double tp = c.tensor, all_reduce = 2 * (tp - 1) / tp;
  const double rows = static_cast<double>(o.batch / c.data) * static_cast<double>(o.block);
  const double s = rows * static_cast<double>(o.width) * 4;
  // Partitioned checkpoints all-gather each block's input in the forward (the checkpointed
  // function runs on the gathered slice) and again for the recompute, and the slice's backward
  // all-gathers its gradient: three all-gathers, 1.5 all-reduces' bytes, more per layer.
  const double gathers = c.partition_activations ? 1.5 * all_reduce * s : 0;
  const double per_layer = (c.checkpointing ? 6 : 4) * all_reduce * s + gathers;
  return static_cast<double>(o.layers) * per_layer + 2 * all_reduce * s + all_reduce * (2 * rows + 1) * 4;
}

Result run_case(const parallel::Runtime& runtime, const Case& c, const Options& o,
                const std::shared_ptr<TensorGroupTraffic>& traffic) {
  parallel::Communicator& job_world = runtime.world();
  const int ranks = c.tensor * c.data;
  // A one-rank case is a job of rank 0 alone; the others wait for it.
  const auto job = runtime.world_ptr()->split(runtime.rank() < ranks ? 0 : 1, runtime.rank(), "case");
  Result r{c};
  if (runtime.rank() < ranks) {
    Allocator& cpu = allocator_for(kCPU);
    cpu.stats().reset_peak();
    models::GPTConfig gpt;  // models::TensorParallelGPT's (dropout under sequence parallelism)
    gpt.n_layer = o.layers, gpt.n_head = o.heads, gpt.n_embd = o.width, gpt.vocab_size = o.vocab, gpt.block_size = o.block;
    gpt.dropout = 0.1;  // GPT-2's: the dropouts' masks are activations sequence parallelism splits
    const parallel::ProcessGroups groups(job, parallel::Topology(ranks, 1, c.tensor));
    int64_t peak_of_case = 0;  // through model construction, initialize and the warm-up step
    std::shared_ptr<nn::Module> model;
    std::shared_ptr<models::TensorParallelGPT> split;
    nn::LayerSequence* layers = nullptr;
    if (c.tensor == 1) {
      auto full = std::make_shared<models::GPT>(gpt, 1);
      layers = full.get();
      model = full;
    } else {
      split = std::make_shared<models::TensorParallelGPT>(
          gpt, groups.tensor_ptr(), models::TensorParallelGPTOptions{.sequence_parallel = c.sequence_parallel});
      layers = split.get();
      model = split;
    }
    if (c.checkpointing) {
      nn::CheckpointPolicy policy = nn::checkpoint_layers_of_type(*layers, "TransformerBlock");
      if (c.partition_activations && !c.sequence_parallel)
        policy = parallel::partition_checkpoint_inputs(std::move(policy), groups.tensor_ptr());
      layers->set_checkpointing(std::move(policy));
    }
    const std::string config = detail::concat(
        R"({"train_batch_size": )", o.batch, R"(, "gradient_accumulation_steps": 1, "steps_per_print": 1000000,
        "tensor_parallel": {"autotp_size": )",
        c.tensor, R"(}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})");
    auto data = bench::synthetic_tokens(o.batch * (o.steps + 2), o.block, o.vocab);
    Initialized init = initialize(Config::from_string(config), model, nullptr, data, groups);
    std::vector<double> times;
    init.engine->on_step([&](const StepReport& report) { times.push_back(report.seconds * 1e3); });
    int64_t step_peak = 0;  // the largest rise of live bytes within a timed step
    for (const Batch& batch : *init.loader) {
      if (init.engine->global_steps() == 1) traffic->reset();  // after the warm-up step
      const int64_t live = cpu.stats().snapshot().total.current;
      if (init.engine->global_steps() >= 1) {
        peak_of_case = std::max(peak_of_case, cpu.stats().snapshot().total.peak);
        cpu.stats().reset_peak();
      }
      const autograd::Variable logits = (*init.engine)(autograd::Variable(batch.inputs), batch.sample_index);
      init.engine->backward(split ? split->loss_of_logits(logits, batch.targets)
                                  : nn::cross_entropy(logits, batch.targets));
      init.engine->step();
      if (init.engine->global_steps() >= 2) step_peak = std::max(step_peak, cpu.stats().snapshot().total.peak - live);
      if (init.engine->global_steps() == o.steps + 1) break;
    }
    times.erase(times.begin());  // the warm-up step
    peak_of_case = std::max(peak_of_case, cpu.stats().snapshot().total.peak);
    r.sent_per_step = traffic->bytes() / o.steps;
    r.collectives_per_step = traffic->collectives() / o.steps;
    r.step_ms = job->all_reduce_scalar(bench::median(times), parallel::ReduceOp::Max);
    r.peak_mib = job->all_reduce_scalar(static_cast<double>(peak_of_case) / (1 << 20), parallel::ReduceOp::Max);
    r.step_peak_mib = job->all_reduce_scalar(static_cast<double>(step_peak) / (1 << 20), parallel::ReduceOp::Max);
    r.closed_form = closed_form_bytes(c, o);
  }
  job_world.barrier();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  try {
    const Options o = parse(argc, argv);
    const int n = runtime.size();
    FATHOM_CHECK(n >= 2, "run under mpirun -np N with N >= 2 (the tensor- and data-parallel size)");
    FATHOM_CHECK(o.batch % n == 0, "--batch ", o.batch, " must be divisible by the ", n, " ranks");
    set_num_threads(1);
    auto traffic = std::make_shared<TensorGroupTraffic>();
    const parallel::CollectiveObservation observing(traffic);
    const std::string tp = std::to_string(n);
    const std::vector<Case> cases = {{"one rank", 1, 1},
                                     {"data " + tp, 1, n},
                                     {"tensor " + tp, n, 1},
                                     {"tensor " + tp + " + sequence parallel", n, 1, true},
                                     {"tensor " + tp + " + activation checkpointing", n, 1, false, true},
                                     {"tensor " + tp + " + partitioned checkpoints", n, 1, false, true, true}};
    std::vector<Result> results;
    for (const Case& c : cases) results.push_back(run_case(runtime, c, o, traffic));
    if (!runtime.is_main_process()) return 0;
    const auto& gpt = bench::gpt_config(o.layers, o.heads, o.width, o.vocab, o.block, true);
    std::printf(
        "GPT %lld layers, %lld heads, %lld wide, vocab %lld: %.2fM parameters, f32 + AdamW; global batch %lld x "
        "%lld tokens per step, dropout 0.1; 1 thread per rank; median of %d steps after 1 warm-up, slowest rank; "
        "peak: live bytes over the case, step: their largest rise within a timed step (activations, "
        "gradients, temporaries), largest rank; tensor sent: per rank and step\n",
        (long long)o.layers, (long long)o.heads, (long long)o.width, (long long)o.vocab,
        static_cast<double>(gpt.parameter_count()) / 1e6, (long long)o.batch, (long long)o.block,
        o.steps);
    std::printf("%-40s %9s %10s %9s %10s %16s %16s %12s %12s\n", "case", "step (ms)", "vs 1 rank", "peak MiB",
                "step MiB", "tensor sent MiB", "closed form MiB", "meas/closed", "collectives");
    const double alone = results[0].step_ms;
    for (const Result& r : results) {
      const double mib = r.sent_per_step / (1 << 20), form = r.closed_form / (1 << 20);
      std::printf("%-40s %9.1f %9.2fx %9.1f %10.1f %16.2f %16.2f %12s %12lld\n", r.c.name.c_str(), r.step_ms,
                  alone / r.step_ms, r.peak_mib, r.step_peak_mib, mib, form,
                  r.closed_form > 0 ? detail::concat(r.sent_per_step / r.closed_form).c_str() : "-",
                  static_cast<long long>(r.collectives_per_step));
    }
    return 0;
  } catch (const Error& e) {
    runtime.abort(e.message());
    return 1;
  }
}
