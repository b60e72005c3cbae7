// fathom_gpt2_bench: the whole GPT-2 124M training step on one GPU, end to end — forward,
// cross-entropy, backward and AdamW through fathom::initialize with bf16 mixed precision —
// for ZeRO stages 0-3 at world size 1 (stage 0 is the throughput number; 1-3 fill the memory
// column, since at one rank they partition nothing but still run their own code paths).
//
// Per stage: build the model (bf16) on the host, move it to the device, initialize from a
// DeepSpeed-style config, run warm-up steps, then timed steps. Each step is timed by the wall
// clock between two device synchronizations. Reported: median ms/step, tokens/s, MFU, the
// device allocator's peak of live and reserved bytes over the stage (peaks reset at its start),
// the kernel launches per step (cuda::kernel_launches: how launch-bound the step can be), and
// the last step's loss (a NaN would mean the step is broken, not slow).
//
// FLOPs per token = 6N + 6·L·C·T (llm.c's count): N = every parameter once (the tied wte/lm_head
// counted once, position embeddings included: 124,439,808 for GPT-2 124M), L layers, C width,
// T sequence length. MFU = tokens/s × FLOPs per token / peak; the peak defaults to 989 TFLOP/s,
// dense bf16 of an H100/H200 SXM.
//
// The time budget (--budget-seconds) is shared by the stages (stage 0 gets twice a later
// stage's share): warm-up and timed steps stop when the next step would not fit, a stage that
// cannot fit setup plus two steps is skipped, and the tables are rewritten after every stage so
// that an outside timeout still leaves what was measured. An allocation that runs out of
// memory halves the batch (down to 1) and repeats the stage; the table says so.
//
// Tokens are random, drawn once on the host and moved to the device with .to(device); every
// step trains on the same batch (throughput, not learning, is measured).
//
//   fathom_gpt2_bench [--out DIR] [--device cuda|cpu] [--arch gpt2|llama|qwen2|mistral] [--preset NAME]
//                     [--batch B] [--seq T]
//                     [--warmup N] [--max-steps N] [--budget-seconds S] [--stages 0,1,2,3]
//                     [--peak-tflops X] [--attention auto|fused|gemm]
// Without a GPU (and --device cuda, the default) it fails with "no CUDA device: ...".
// --device cpu (default preset tiny, batch 4 x 64) runs the same logic on the host, as a smoke
// test; its MFU column is empty unless --peak-tflops is given.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/cuda_runtime.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "core/tensor.h"
#include "engine/config/config.h"
#include "models/model_spec.h"
#include "engine/initialize.h"
#include "nn/loss.h"

using namespace fathom;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Options {
  std::string out_dir = ".";
  Device device = Device::cuda(0);
  std::string arch = "gpt2";  // any models::ModelSpec architecture
  std::string preset;      // "" = gpt2-124M (llama: 100M) on cuda, tiny on cpu
  int64_t batch = 0, seq = 0;  // 0 = 16 x 1024 on cuda, 4 x 64 on cpu
  int warmup = 2;
  int max_steps = 20;      // timed steps at most
  double budget_s = 0;     // 0 = 120 on cuda, 20 on cpu
  std::vector<int> stages = {0, 1, 2, 3};
  double peak_tflops = -1;  // < 0: 989 on cuda, none on cpu
  nn::AttentionKernel attention = nn::AttentionKernel::Auto;
};

const char* kUsage =
    "usage: fathom_gpt2_bench [--out DIR] [--device cuda|cpu] [--arch gpt2|llama|qwen2|mistral] "
    "[--preset tiny|small|gpt2-124M|100M|350M] [--batch B] [--seq T] "
    "[--warmup N] [--max-steps N] [--budget-seconds S] [--stages 0,1,2,3] [--peak-tflops X] "
    "[--attention auto|fused|gemm]";

std::vector<int> parse_stages(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    FATHOM_CHECK(item == "0" || item == "1" || item == "2" || item == "3",
                 "fathom_gpt2_bench: --stages takes a list such as 0,1,2,3, got \"", list, "\"");
    out.push_back(item[0] - '0');
  }
  FATHOM_CHECK(!out.empty(), "fathom_gpt2_bench: --stages is empty");
  return out;
}

double parse_number(const std::string& arg, const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  FATHOM_CHECK(used == text.size() && used > 0, "fathom_gpt2_bench: ", arg, " needs a number, got \"", text, "\"");
  return value;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      FATHOM_CHECK(i + 1 < argc, "fathom_gpt2_bench: ", arg, " needs a value; ", kUsage);
      return argv[++i];
    };
    auto positive = [&](double v) {
      FATHOM_CHECK(v >= 1 && v == std::floor(v), "fathom_gpt2_bench: ", arg, " needs a positive integer, got ", v);
      return static_cast<int64_t>(v);
    };
    if (arg == "--out") o.out_dir = value();
    else if (arg == "--device") o.device = Device::parse(value());
    else if (arg == "--preset") o.preset = value();
    else if (arg == "--arch") o.arch = value();
    else if (arg == "--attention") o.attention = nn::parse_attention_kernel(value(), "--attention");
    else if (arg == "--batch") o.batch = positive(parse_number(arg, value()));
    else if (arg == "--seq") o.seq = positive(parse_number(arg, value()));
    else if (arg == "--warmup") o.warmup = static_cast<int>(std::max(0.0, parse_number(arg, value())));
    else if (arg == "--max-steps") o.max_steps = static_cast<int>(positive(parse_number(arg, value())));
    else if (arg == "--budget-seconds") o.budget_s = parse_number(arg, value());
    else if (arg == "--stages") o.stages = parse_stages(value());
    else if (arg == "--peak-tflops") o.peak_tflops = parse_number(arg, value());
    else if (arg == "--help" || arg == "-h") {
      std::printf("%s\n", kUsage);
      std::exit(0);
    } else FATHOM_FAIL("fathom_gpt2_bench: unknown argument '", arg, "'; ", kUsage);
  }
  const bool cpu = o.device.is_cpu();
  if (o.preset.empty()) o.preset = cpu ? "tiny" : o.arch == "gpt2" ? "gpt2-124M" : "100M";
  if (o.batch == 0) o.batch = cpu ? 4 : 16;
  if (o.seq == 0) o.seq = cpu ? 64 : 1024;
  if (o.budget_s <= 0) o.budget_s = cpu ? 20 : 120;
  if (o.peak_tflops < 0) o.peak_tflops = cpu ? 0 : 989;
  return o;
}

bool is_out_of_memory(const std::string& message) {
  // The CUDA caching allocator says "out of memory on cuda:N ..."; the host allocator under
  // FATHOM_CPU_MEMORY_LIMIT_MB says "out of host memory ..." (how the CPU smoke test gets here).
  return message.find("out of memory") != std::string::npos || message.find("out of host memory") != std::string::npos;
}

struct Row {
  int stage = 0;
  int64_t batch = 0;
  int warmup = 0, timed = 0;
  double setup_s = 0, ms = 0, tokens_per_s = 0, mfu = 0, loss = 0;
  double launches_per_step = 0;  // kernel launches per timed step (cuda::kernel_launches)
  int64_t peak_bytes = 0, peak_reserved = 0;
  bool measured = false, failed = false;
  std::string note;
};

// Everything one stage needs to know that does not change between stages.
struct Setup {
  Options options;
  models::ModelSpec model;
  int64_t parameters = 0;  // N
  double flops_per_token = 0;
  Tensor host_tokens;  // [batch, seq + 1] i64, drawn once
};

// Hands cached blocks back, so that each stage's reserved bytes start from what it uses itself
// (and a stage that ran out of memory leaves nothing behind for the retry).
void release_cache(Device device) {
  if (device.is_cuda()) cuda::empty_cache(device.index);
  else if (auto* cpu = dynamic_cast<CpuAllocator*>(&allocator_for(device))) cpu->empty_cache();
}

void synchronize(Device device) {
  if (device.is_cuda()) cuda::synchronize_device(device.index);
}

std::string config_json(int64_t batch, int stage) {
  return detail::concat(R"({"train_micro_batch_size_per_gpu": )", batch,
                        R"(, "gradient_accumulation_steps": 1, "steps_per_print": 1000000000,
      "optimizer": {"type": "AdamW", "params": {"lr": 6e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
      "bf16": {"enabled": true}, "zero_optimization": {"stage": )",
                        stage, "}}");
}

// One stage at one batch size. `allot_s`: seconds this stage may spend, setup included.
Row run_stage(const Setup& setup, int stage, int64_t batch, double allot_s) {
  const Options& o = setup.options;
  const Device device = o.device;
  Row row;
  row.stage = stage;
  row.batch = batch;
  release_cache(device);
  allocator_for(device).stats().reset_peak();
  const auto stage_start = Clock::now();

  auto model = setup.model.build(1);
  FATHOM_CHECK(model->parameter_count() == setup.parameters, "fathom_gpt2_bench: the model has ",
               model->parameter_count(), " parameters, the FLOP count assumed ", setup.parameters);
  model->to(device);  // before initialize: masters, optimizer states and ZeRO buffers follow it
  Initialized init = initialize(Config::from_string(config_json(batch, stage)), model);
  Engine& engine = *init.engine;
  engine.on_step([](const StepReport&) {});  // no log line per step
  const Tensor tokens = setup.host_tokens.narrow(0, 0, batch).to(device);
  const Tensor inputs = tokens.narrow(1, 0, o.seq).contiguous();
  const Tensor targets = tokens.narrow(1, 1, o.seq).contiguous();
  synchronize(device);
  row.setup_s = seconds_since(stage_start);

  auto train_step = [&] {
    synchronize(device);
    const auto start = Clock::now();
    engine.backward(nn::cross_entropy(engine(autograd::Variable(inputs)), targets));
    engine.step();
    synchronize(device);
    return seconds_since(start);
  };
  // Leave room for at least one timed step after the warm-up.
  double last = 0;
  for (int i = 0; i < o.warmup; ++i) {
    last = train_step();
    ++row.warmup;
    if (seconds_since(stage_start) + 2 * last > allot_s) break;
  }
  std::vector<double> times;
  const int64_t launches_at_start = cuda::kernel_launches();
  while (static_cast<int>(times.size()) < o.max_steps) {
    times.push_back(train_step());
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    if (seconds_since(stage_start) + sorted[sorted.size() / 2] > allot_s) break;
  }
  std::sort(times.begin(), times.end());
  const size_t mid = times.size() / 2;
  const double median_s = times.size() % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
  row.timed = static_cast<int>(times.size());
  row.launches_per_step = static_cast<double>(cuda::kernel_launches() - launches_at_start) / static_cast<double>(times.size());
  row.ms = median_s * 1e3;
  row.tokens_per_s = static_cast<double>(batch * o.seq) / median_s;
  row.mfu = o.peak_tflops > 0 ? row.tokens_per_s * setup.flops_per_token / (o.peak_tflops * 1e12) : 0;
  row.loss = engine.last_report().loss;
  const MemorySnapshot snapshot = memory_snapshot(device);
  row.peak_bytes = snapshot.total.peak;
  row.peak_reserved = snapshot.peak_reserved;
  row.measured = true;
  if (!std::isfinite(row.loss)) {
    row.failed = true;
    row.note = "loss is not finite: the step is broken";
  }
  return row;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string gib(int64_t bytes) { return fixed(static_cast<double>(bytes) / (1ull << 30), 2); }

std::string now_utc() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

std::string device_line(Device device) {
  if (device.is_cpu()) return "device: cpu (smoke run of the benchmark's logic; the GPU numbers are what count)";
  const cuda::DeviceProperties p = cuda::device_properties(device.index);
  return detail::concat("device: ", device.str(), " ", p.name, ", sm_", p.major, p.minor, ", ",
                        gib(static_cast<int64_t>(p.total_memory)), " GiB, driver ", p.driver_version, ", runtime ",
                        p.runtime_version);
}

std::string markdown(const Setup& s, const std::vector<Row>& rows, const std::string& device, const std::string& date) {
  const Options& o = s.options;
  const models::ModelSpec& m = s.model;
  std::ostringstream out;
  out << "# Fathom " << m.architecture() << " training step, end to end (fathom_gpt2_bench, " << date << ")\n\n";
  out << device << "\n";
  out << "model: preset " << o.preset << ", " << m.describe() << "; N = " << s.parameters
      << " parameters (all, a tied head once, position embeddings included)\n";
  out << "step: bf16 mixed precision, AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1, no clipping) through "
         "fathom::initialize, world size 1, batch "
      << o.batch << " x " << o.seq << " tokens requested (the batch column says what ran; random tokens, one batch reused), wall clock between device synchronizations\n";
  // The shape of one layer's queries decides auto's choice (a broadcast view: nothing allocated).
  const int64_t heads = m.decoder.n_head;
  const Tensor query_like =
      Tensor::zeros({1, 1, 1, 1}, DType::BF16).expand({o.batch, heads, o.seq, m.hidden_size() / heads});
  out << "attention kernel: "
      << nn::attention_kernel_name(
             nn::resolve_attention_kernel(m.decoder.attention, query_like))
      << " (nn/attention_kernel.h; --attention or FATHOM_ATTENTION to choose)\n";
  out << "flops: 6N + 6*L*C*T = " << fixed(s.flops_per_token / 1e6, 1) << " MFLOP per token; MFU against "
      << (o.peak_tflops > 0 ? fixed(o.peak_tflops, 0) + " TFLOP/s (dense bf16, H100/H200 SXM)" : std::string("no peak (cpu)"))
      << "\n";
  out << "memory: the device allocator's peak of live (and reserved) bytes over each stage, model build included\n\n";
  out << "| ZeRO stage | batch | warm-up + timed steps | ms/step (median) | tokens/s | MFU | peak memory | "
         "peak reserved | kernel launches/step | setup (s) | last loss | note |\n";
  out << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    out << "| " << r.stage << " | " << r.batch << " | ";
    if (r.measured) {
      out << r.warmup << " + " << r.timed << " | " << fixed(r.ms, 1) << " | " << fixed(r.tokens_per_s, 0) << " | "
          << (o.peak_tflops > 0 ? fixed(100 * r.mfu, 1) + "%" : std::string("-")) << " | " << format_bytes(static_cast<double>(r.peak_bytes))
          << " | " << format_bytes(static_cast<double>(r.peak_reserved)) << " | " << fixed(r.launches_per_step, 0)
          << " | " << fixed(r.setup_s, 1) << " | " << fixed(r.loss, 3) << " | ";
    } else {
      out << "- | - | - | - | - | - | - | - | - | ";
    }
    std::string note = r.note;
    for (char& c : note)
      if (c == '|' || c == '\n') c = c == '|' ? '/' : ' ';
    out << note << " |\n";
  }
  return out.str();
}

std::string tsv(const Setup& s, const std::vector<Row>& rows) {
  std::ostringstream out;
  out << "stage\tbatch\tseq\twarmup\ttimed\tms_per_step\ttokens_per_s\tmfu\tpeak_bytes\tpeak_reserved_bytes\tlaunches_per_step\tsetup_s\t"
         "loss\tparameters\tflops_per_token\tnote\n";
  for (const Row& r : rows) {
    std::string note = r.note;
    for (char& c : note)
      if (c == '\t' || c == '\n') c = ' ';
    out << r.stage << "\t" << r.batch << "\t" << s.options.seq << "\t" << r.warmup << "\t" << r.timed << "\t"
        << (r.measured ? fixed(r.ms, 3) : "-") << "\t" << (r.measured ? fixed(r.tokens_per_s, 1) : "-") << "\t"
        << (r.measured && s.options.peak_tflops > 0 ? fixed(r.mfu, 5) : "-") << "\t"
        << (r.measured ? std::to_string(r.peak_bytes) : "-") << "\t"
        << (r.measured ? std::to_string(r.peak_reserved) : "-") << "\t"
        << (r.measured ? fixed(r.launches_per_step, 1) : "-") << "\t" << (r.measured ? fixed(r.setup_s, 2) : "-")
        << "\t" << (r.measured ? fixed(r.loss, 4) : "-") << "\t" << s.parameters << "\t"
        << fixed(s.flops_per_token, 0) << "\t" << note << "\n";
  }
  return out.str();
}

void write_tables(const Setup& s, const std::vector<Row>& rows, const std::string& device, const std::string& date) {
  std::filesystem::create_directories(s.options.out_dir);
  const std::filesystem::path dir(s.options.out_dir);
  std::ofstream(dir / "gpt2.md") << markdown(s, rows, device, date);
  std::ofstream(dir / "gpt2.tsv") << tsv(s, rows);
}

Tensor random_tokens(int64_t rows, int64_t cols, int64_t vocab) {
  Tensor host = Tensor::empty({rows, cols}, DType::I64);
  int64_t* p = host.data<int64_t>();
  uint64_t state = 0x853c49e6748fea9bull;
  for (int64_t i = 0; i < rows * cols; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return host;
}

int run(const Options& options) {
  const auto start = Clock::now();
  if (options.device.is_cuda()) cuda::require_device(options.device.index);  // "no CUDA device: ..."
  Setup s;
  s.options = options;
  s.model = models::ModelSpec::preset(options.arch, options.preset);
  s.model.set_attention(options.attention);
  // Built in bf16, so no f32 copy of the model ever exists.
  s.model.decoder.dtype = DType::BF16;
  FATHOM_CHECK(options.seq <= s.model.max_positions(), "fathom_gpt2_bench: --seq ", options.seq,
               " is longer than the model's ", s.model.max_positions(), " positions");
  // Counted from the config rather than from a model built for the purpose (a 124M-parameter
  // host model takes seconds to initialise); run_stage checks it against the real model.
  s.parameters = s.model.parameter_count();
  const int64_t layers = s.model.layers().size() - 2;
  // An untied input table is a lookup, not a matmul: not counted.
  const int64_t lookup = !s.model.decoder.tied_embeddings
                             ? s.model.vocab_size() * s.model.hidden_size() : 0;
  s.flops_per_token = 6.0 * static_cast<double>(s.parameters - lookup) +
                      6.0 * static_cast<double>(layers * s.model.hidden_size() * options.seq);
  s.host_tokens = random_tokens(options.batch, options.seq + 1, s.model.vocab_size());
  const std::string device = device_line(options.device), date = now_utc();
  std::printf("- %s\n", device.c_str());  // progress; the table at the end repeats it
  std::printf("- budget %.0f s; setup took %.1f s; stages", options.budget_s, seconds_since(start));
  for (int st : options.stages) std::printf(" %d", st);
  std::printf("\n");
  std::fflush(stdout);

  std::vector<Row> rows;
  int64_t batch = options.batch;
  double previous_need_s = 0;  // the last measured stage's setup plus two steps
  bool any_failed = false;
  for (size_t i = 0; i < options.stages.size(); ++i) {
    const int stage = options.stages[i];
    const double left = options.budget_s - seconds_since(start);
    double weights = 0;
    for (size_t j = i; j < options.stages.size(); ++j) weights += options.stages[j] == 0 ? 2 : 1;
    const double allot = left * (stage == 0 ? 2 : 1) / weights;
    Row row;
    std::string halved;
    if (i > 0 && left < previous_need_s) {
      row.stage = stage;
      row.batch = batch;
      row.note = detail::concat("skipped: ", fixed(left, 0), " s of the budget left, a stage needs about ",
                                fixed(previous_need_s, 0), " s");
    } else {
      while (true) {
        try {
          row = run_stage(s, stage, batch, allot);
          break;
        } catch (const Error& e) {
          release_cache(options.device);
          if (is_out_of_memory(e.message()) && batch > 1) {
            std::printf("- stage %d: out of memory at batch %lld, halving the batch\n", stage,
                        static_cast<long long>(batch));
            halved += detail::concat(halved.empty() ? "" : ", ", "out of memory at batch ", batch);
            batch /= 2;
            continue;
          }
          row = Row{};
          row.stage = stage;
          row.batch = batch;
          row.failed = true;
          row.note = "error: " + e.message();
          break;
        }
      }
    }
    if (!halved.empty()) row.note = halved + ", halved to " + std::to_string(batch) + (row.note.empty() ? "" : "; ") + row.note;
    release_cache(options.device);
    if (row.measured) previous_need_s = row.setup_s + 2 * row.ms / 1e3;
    any_failed = any_failed || row.failed;
    std::printf("- stage %d: %s\n", stage,
                row.measured ? detail::concat(fixed(row.ms, 1), " ms/step, ", fixed(row.tokens_per_s, 0), " tokens/s, peak ",
                                              format_bytes(static_cast<double>(row.peak_bytes)), row.note.empty() ? "" : "; ", row.note)
                                   .c_str()
                             : row.note.c_str());
    std::fflush(stdout);
    rows.push_back(row);
    write_tables(s, rows, device, date);
  }
  std::printf("\n%s", markdown(s, rows, device, date).c_str());
  std::printf("\nwrote %s/gpt2.md and gpt2.tsv in %.0f s\n", options.out_dir.c_str(), seconds_since(start));
  return any_failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const Error& e) {
    std::fprintf(stderr, "fathom_gpt2_bench: %s\n", e.message().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fathom_gpt2_bench: %s\n", e.what());
    return 1;
  }
}
