// fathom-train: trains a GPT. With no arguments it trains a small byte-level GPT on the
// built-in corpus (Fathom's own docs and sources) — nothing to download, any directory.
//
//   fathom-train [--config ds_config.json] [--data FILE] [--preset small] [--steps N] [--out DIR]
//
// It prints a progress line every steps_per_print steps, evaluates the validation loss every
// --eval-interval steps, and writes model.safetensors (GPT-2 layout) and config.json to --out.
// Under `mpirun -np N` (or the fathom launcher) the same command trains data-parallel on N
// ranks with the same global batch; rank 0 prints and writes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/threads.h"
#include "engine/byte_text_dataset.h"
#include "core/json_writer.h"
#include "engine/checkpoint_reader.h"
#include "engine/config_auto.h"
#include "engine/initialize.h"
#include "engine/memory_report.h"
#include "engine/token_dataset.h"
#include "launcher/default_corpus.h"
#include "launcher/train_options.h"
#include "models/gpt.h"
#include "models/gpt_weights.h"
#include "nn/loss.h"
#include "parallel/runtime.h"

using namespace fathom;

namespace {

const char* kDefaultConfig = R"({
  # fathom-train's built-in config (DeepSpeed's key names; --config replaces it)
  "train_micro_batch_size_per_gpu": 16,
  "gradient_accumulation_steps": 1,
  "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": @STEPS@, "warmup_num_steps": @WARMUP@,
                                                     "warmup_type": "linear", "cos_min_ratio": 0.1}},
  "gradient_clipping": 1.0,
  "steps_per_print": 10,
  "seed": 1337
})";

std::string clock_text(double seconds) {
  const int s = static_cast<int>(std::lround(seconds));
  char out[32];
  std::snprintf(out, sizeof out, "%02d:%02d", s / 60, s % 60);
  return out;
}

// Mean loss over up to `max_batches` validation micro-batches, without a graph.
double validation_loss(models::GPT& model, DataLoader& loader, int max_batches) {
  autograd::NoGradGuard no_grad;
  model.eval();
  double total = 0;
  int batches = 0;
  for (const Batch& batch : loader) {
    const Device device = model.device();
    total += nn::cross_entropy(model(autograd::Variable(batch.inputs.to(device))), batch.targets.to(device)).item();
    if (++batches == max_batches) break;
  }
  model.train();
  loader.load_state({0, 0});  // the same validation batches every time
  return batches ? total / batches : std::nan("");
}

// The values fathom-train gives a config's "auto" keys, as the Hugging Face Trainer's DeepSpeed
// integration derives them from its own arguments: batch sizes and accumulation from fathom-train's
// built-in config and the world size, the optimizer's and schedule's settings from its defaults
// and --steps, fp16/bf16 from its precision (f32), the bucket sizes from the model's width.
AutoValues auto_values(const Config& defaults, int64_t hidden, int64_t warmup, int64_t steps, int world) {
  const auto number = [](double value) { return json_number(value); };
  const auto integer = [](int64_t value) { return std::to_string(value); };
  const BatchConfig& batch = defaults.batch;
  const int64_t micro = batch.train_micro_batch_size_per_gpu, accumulation = batch.gradient_accumulation_steps;
  const std::string builtin = "fathom-train's default";
  AutoValues v = {
      {"train_micro_batch_size_per_gpu", {integer(micro), builtin}},
      {"gradient_accumulation_steps", {integer(accumulation), builtin}},
      {"train_batch_size", {integer(micro * accumulation * world),
                            "micro-batch x accumulation x " + std::to_string(world) + (world == 1 ? " rank" : " ranks")}},
      {"gradient_clipping", {number(defaults.gradient_clipping), builtin}},
      {"fp16.enabled", {"false", "fathom-train trains in f32"}},
      {"bf16.enabled", {"false", "fathom-train trains in f32"}},
      {"scheduler.params.warmup_num_steps", {integer(warmup), builtin + " for --steps " + std::to_string(steps)}},
      {"scheduler.params.total_num_steps", {integer(steps), "--steps"}},
      {"scheduler.params.warmup_min_lr", {"0.0", builtin}},
      {"zero_optimization.reduce_bucket_size", {integer(hidden * hidden), "hidden size squared"}},
      {"zero_optimization.stage3_prefetch_bucket_size",
       {integer(static_cast<int64_t>(0.9 * static_cast<double>(hidden * hidden))), "0.9 x hidden size squared"}},
      {"zero_optimization.stage3_param_persistence_threshold", {integer(10 * hidden), "10 x hidden size"}},
  };
  for (const auto& [name, value] : defaults.optimizer.params) {
    JsonWriter w(JsonWriter::Layout::Inline);
    if (const double* real = std::get_if<double>(&value.value())) w.value(*real);
    else if (const bool* flag = std::get_if<bool>(&value.value())) w.value(*flag);
    else {
      w.begin_array();
      for (double item : std::get<std::vector<double>>(value.value())) w.value(item);
      w.end_array();
    }
    v["optimizer.params." + name] = {w.str(), builtin};
  }
  v["optimizer.params.eps"] = {"1e-08", builtin};
  if (const auto lr = v.find("optimizer.params.lr"); lr != v.end())
    v["scheduler.params.warmup_max_lr"] = {lr->second.json, builtin + " lr"};
  return v;
}

int run(const launcher::TrainOptions& opt, const parallel::Runtime& runtime) {
  const bool main_rank = runtime.is_main_process();
  if (opt.threads > 0) set_num_threads(opt.threads);
  // The built-in schedule spans the run: --steps fills total_num_steps, and the warm-up is a tenth
  // of it, 2 to 20 steps (WarmupCosineLR wants at least 2, and a cosine phase of nonzero length).
  int64_t warmup = std::clamp<int64_t>(opt.steps / 10, 2, 20);
  if (warmup == opt.steps) ++warmup;
  std::string builtin = kDefaultConfig;
  builtin.replace(builtin.find("@STEPS@"), 7, std::to_string(opt.steps));
  builtin.replace(builtin.find("@WARMUP@"), 8, std::to_string(warmup));
  const Config defaults = Config::from_string(builtin);
  models::GPTConfig sizes = models::GPTConfig::preset(opt.preset);
  opt.apply_sizes(sizes);
  std::vector<AutoFilled> filled;
  Config config = opt.config_path.empty()
                      ? defaults
                      : config_from_file_with_auto(opt.config_path, auto_values(defaults, sizes.n_embd, warmup,
                                                                                opt.steps, runtime.size()),
                                                   &filled);
  if (main_rank)
    for (const AutoFilled& f : filled) std::printf("fathom-train: \"auto\" %s\n", f.line().c_str());
  if (opt.seed) config.seed = *opt.seed;
  // What a given config lacks, fathom-train fills from its own defaults, and says so (the
  // library keeps refusing a config without an optimizer: only a program knows its defaults).
  if (config.optimizer.type.empty()) {
    config.optimizer = defaults.optimizer;
    if (main_rank)
      std::printf("fathom-train: optimizer: %s (fathom-train's default: the config has none)\n",
                  config.optimizer.to_json().c_str());
  }
  if (config.scheduler.type.empty() && !opt.config_path.empty()) {
    config.scheduler = defaults.scheduler;
    if (main_rank)
      std::printf("fathom-train: scheduler: %s (fathom-train's default: the config has none)\n",
                  config.scheduler.to_json().c_str());
  }

  // Data: a token .bin, any other file as bytes, or the built-in corpus.
  models::GPTConfig model_config = sizes;
  std::shared_ptr<TokenDataset> all;
  std::string data_name = "built-in corpus";
  if (opt.data_path.empty()) {
    all = std::make_shared<ByteTextDataset>(
        ByteTextDataset::from_string(std::string(launcher::default_corpus()), model_config.block_size));
    model_config.vocab_size = ByteTextDataset::kVocabSize;
  } else if (opt.data_path.size() > 4 && opt.data_path.substr(opt.data_path.size() - 4) == ".bin") {
    all = std::make_shared<TokenDataset>(
        TokenDataset::from_file(opt.data_path, model_config.block_size,
                                      TokenFileOptions{TokenFileFormat::Auto, model_config.vocab_size}));
    data_name = opt.data_path;
  } else {
    all = std::make_shared<ByteTextDataset>(
        ByteTextDataset::from_file(opt.data_path, model_config.block_size));
    model_config.vocab_size = ByteTextDataset::kVocabSize;
    data_name = opt.data_path;
  }
  const TrainValSplit split = split_train_val(*all, 0.05);
  auto train = std::make_shared<TokenDataset>(split.train);
  auto val = std::make_shared<TokenDataset>(split.val);

  auto model = std::make_shared<models::GPT>(model_config, config.seed.value_or(kDefaultSeed));
  if (!opt.init_path.empty()) models::load_gpt2_safetensors(*model, opt.init_path);
  const Device device = launcher::resolve_device(opt.device, runtime.device());
  model->to(device);  // before the engine: its optimizer and ZeRO buffers follow the parameters
  const int64_t parameter_count = model->parameter_count();  // before ZeRO-3 shards the parameters
  // The process groups: MPI for host tensors and, with a GPU per rank, NCCL for device tensors.
  Initialized init = initialize(config, model, nullptr, train, runtime.groups());
  Engine& engine = *init.engine;
  if (!opt.resume_dir.empty()) {
    engine.load_checkpoint(find_checkpoint_dir(opt.resume_dir));
    if (main_rank)
      std::printf("fathom-train: resumed from %s at step %lld\n", opt.resume_dir.c_str(),
                  static_cast<long long>(engine.global_steps()));
  }
  const std::string checkpoint_dir = (std::filesystem::path(opt.out_dir) / "checkpoints").string();
  DataLoader val_loader(val, engine.options().micro_batch_size, 1, 0, 1, /*shuffle=*/false);

  const int64_t tokens_per_step = engine.options().train_batch_size() * model_config.block_size;
  if (main_rank) {
    std::printf("fathom-train: GPT %s (%lld layers, %lld heads, %lld wide, vocab %lld, block %lld): %.2fM parameters\n",
                opt.preset.c_str(), (long long)model_config.n_layer, (long long)model_config.n_head,
                (long long)model_config.n_embd, (long long)model_config.vocab_size, (long long)model_config.block_size,
                parameter_count / 1e6);
    std::printf("fathom-train: data %s: %lld train / %lld val sequences; %lld tokens per step; %d rank%s x %s\n",
                data_name.c_str(), (long long)train->size(), (long long)val->size(), (long long)tokens_per_step,
                runtime.size(), runtime.size() == 1 ? "" : "s",
                device.is_cpu() ? (std::to_string(num_threads()) + " threads").c_str() : device.str().c_str());
    std::fflush(stdout);
  }

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  engine.on_step([&](const StepReport& r) {
    const bool last = r.step == opt.steps;
    if (!main_rank) return;
    if (r.step == 1) std::printf("memory per rank: %s\n", format_model_state_bytes(model_state_bytes()).c_str());
    if (r.step % std::max<int64_t>(1, engine.options().steps_per_print) != 0 && r.step != 1 && !last) return;
    const double spent = elapsed();
    const double eta = spent / static_cast<double>(r.step) * static_cast<double>(opt.steps - r.step);
    const double mem_gib = static_cast<double>(memory_snapshot(device).total.current) / (1u << 30);
    std::printf("step %lld/%lld | loss %.3f | lr %.1e | %.1fk tok/s | grad norm %.2f | mem %.2f GiB | %s < %s\n",
                (long long)r.step, (long long)opt.steps, r.loss, r.lr, r.tokens_per_second / 1e3, r.grad_norm, mem_gib,
                clock_text(spent).c_str(), clock_text(eta).c_str());
    std::fflush(stdout);
  });

  double last_val = std::nan("");
  while (engine.global_steps() < opt.steps) {
    for (const Batch& batch : *init.loader) {
      const autograd::Variable logits = engine(autograd::Variable(batch.inputs.to(device)), batch.sample_index);
      engine.backward(nn::cross_entropy(logits, batch.targets.to(device), batch.loss_normaliser));
      engine.step();
      if (batch.micro_step + 1 < engine.options().gradient_accumulation_steps) continue;
      const int64_t step = engine.global_steps();
      if (step == opt.steps || (opt.eval_interval > 0 && step % opt.eval_interval == 0)) {
        last_val = validation_loss(*model, val_loader, opt.eval_batches);
        if (main_rank) std::printf("step %lld/%lld | val loss %.3f\n", (long long)step, (long long)opt.steps, last_val);
        std::fflush(stdout);
      }
      if (opt.save_every > 0 && (step % opt.save_every == 0 || step == opt.steps)) {
        engine.save_checkpoint(checkpoint_dir);
        if (main_rank)
          std::printf("step %lld/%lld | checkpoint %s/global_step%lld\n", (long long)step, (long long)opt.steps,
                      checkpoint_dir.c_str(), (long long)step);
      }
      if (step >= opt.steps) break;
    }
  }

  // Every rank joins the consolidation (ZeRO-3 gathers its shards); rank 0 writes the model.
  const nn::NamedTensors weights = engine.consolidated_state_dict();
  if (!main_rank) return 0;
  std::filesystem::create_directories(opt.out_dir);
  const std::string model_path = (std::filesystem::path(opt.out_dir) / "model.safetensors").string();
  models::save_gpt2_safetensors(model->config(), weights, model_path);
  std::ofstream(std::filesystem::path(opt.out_dir) / "config.json") << config.to_json() << "\n";
  std::printf("fathom-train: done in %s: train loss %.3f, val loss %.3f; wrote %s and config.json\n",
              clock_text(elapsed()).c_str(), engine.last_report().loss, last_val, model_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  // One rank's error ends the whole job with its message (the others may be waiting for it).
  const auto fail = [&](const std::string& message) {
    if (runtime.size() > 1) runtime.abort(message);
    std::fprintf(stderr, "fathom: %s\n", message.c_str());
    return 1;
  };
  try {
    const launcher::TrainOptions options = launcher::parse_train_options(argc, argv);
    if (options.help) {
      if (runtime.is_main_process()) std::cout << launcher::train_usage();
      return 0;
    }
    return run(options, runtime);
  } catch (const Error& e) {
    return fail(e.message());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
