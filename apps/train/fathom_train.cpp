// fathom-train: trains a GPT. With no arguments it trains a small byte-level GPT on the
// built-in corpus (Fathom's own docs and sources) — nothing to download, any directory.
//
//   fathom-train [--config ds_config.json] [--data FILE] [--preset small] [--steps N] [--out DIR]
//
// It prints a progress line every steps_per_print steps, evaluates the validation loss every
// --eval-interval steps, and writes model.safetensors (GPT-2 layout) and config.json to --out.
// Under `mpirun -np N` (or the fathom launcher) the same command trains data-parallel on N
// ranks with the same global batch; rank 0 prints and writes. With the config's
// tensor_parallel.autotp_size = t, the N ranks are t-way tensor parallel x N/t data parallel;
// with pipeline.stages = p, p pipeline stages x N/p data parallel (docs/pipeline_parallel.md).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/threads.h"
#include "engine/initialize.h"
#include "engine/monitor/memory_report.h"
#include "engine/pipeline_executor.h"
#include "engine/stop_signals.h"
#include "engine/data/token_dataset.h"
#include "apps/job_errors.h"
#include "apps/train/train_config.h"
#include "apps/train/train_data.h"
#include "apps/train/train_memory.h"
#include "apps/train/train_model.h"
#include "apps/train/train_options.h"
#include "apps/train/train_output.h"
#include "apps/train/train_resume.h"
#include "apps/train/train_validation.h"
#include "models/gpt_weights.h"
#include "parallel/pipeline_transport.h"
#include "parallel/runtime.h"
#include "zero/sharded_state.h"

using namespace fathom;

namespace {

std::string clock_text(double seconds) {
  const int s = static_cast<int>(std::lround(seconds));
  char out[32];
  std::snprintf(out, sizeof out, "%02d:%02d", s / 60, s % 60);
  return out;
}

// Fault injection for the restart tests (docs/reliability.md): FATHOM_TEST_KILL_AT_STEP=N makes
// the last rank of a job's first attempt die by SIGKILL after step N, as a crashed node would.
void kill_if_asked(int64_t step, const parallel::Runtime& runtime) {
  static const char* at = std::getenv("FATHOM_TEST_KILL_AT_STEP");
  const char* restart = std::getenv("FATHOM_RESTART_COUNT");
  if (at && std::to_string(step) == at && (!restart || std::string(restart) == "0") &&
      runtime.rank() == runtime.size() - 1)
    std::raise(SIGKILL);
}

int run(const apps::TrainOptions& command_line, const parallel::Runtime& runtime) {
  const bool main_rank = runtime.is_main_process();
  std::vector<std::string> log;
  const apps::TrainOptions given = apps::with_restart_resume(command_line, &log);
  // --resume: the run's model, data, length and config come from the checkpoint unless given.
  std::optional<apps::ResumePoint> resume;
  if (!given.resume_dir.empty()) resume = apps::open_resume_point(given.resume_dir, given.resume_tag);
  const apps::TrainOptions opt = resume ? apps::resumed_options(given, *resume, &log) : given;
  if (resume && resume->global_steps >= opt.steps) {
    if (main_rank)
      std::printf("fathom-train: the checkpoint %s/%s is at step %lld and the run ends at --steps %lld: nothing left "
                  "to train (pass a larger --steps to go on)\n", resume->dir.c_str(), resume->tag.c_str(),
                  static_cast<long long>(resume->global_steps), static_cast<long long>(opt.steps));
    return 0;
  }
  apps::prepare_out_dir(opt, resume, main_rank);
  if (opt.threads > 0) set_num_threads(opt.threads);
  models::GPTConfig sizes = models::GPTConfig::preset(opt.preset);
  opt.apply_sizes(sizes);
  // The tensor-parallel size decides the data-parallel one, which the batch sizes resolve for.
  const bool config_from_checkpoint = resume && opt.config_path.empty();
  const int tensor_size =
      config_from_checkpoint
          ? static_cast<int>(Config::from_string(resume->config_json, ConfigFormat::Json).tensor_parallel_size)
          : apps::config_tensor_parallel_size(opt.config_path);
  FATHOM_CHECK(runtime.size() % tensor_size == 0, "tensor_parallel.autotp_size is ", tensor_size, " but the job has ",
               runtime.size(), runtime.size() == 1 ? " rank" : " ranks", ", which ", tensor_size,
               " does not divide; launch a multiple of ", tensor_size, " processes or change autotp_size");
  const int pipeline_size =
      config_from_checkpoint
          ? static_cast<int>(std::max<int64_t>(1, Config::from_string(resume->config_json, ConfigFormat::Json).pipeline.stages))
          : apps::config_pipeline_stages(opt.config_path);
  FATHOM_CHECK(runtime.size() % (tensor_size * pipeline_size) == 0, "pipeline.stages is ", pipeline_size,
               tensor_size > 1 ? detail::concat(" and tensor_parallel.autotp_size ", tensor_size) : std::string(),
               " but the job has ", runtime.size(), runtime.size() == 1 ? " rank" : " ranks", ", which ",
               pipeline_size * tensor_size, " does not divide; launch a multiple of ", pipeline_size * tensor_size,
               " processes or change the config");
  const int data_size = runtime.size() / (tensor_size * pipeline_size);
  Config config = config_from_checkpoint
                      ? apps::resumed_config(*resume, data_size, &log)
                      : apps::train_config(opt.config_path, sizes.n_embd, opt.steps, data_size, &log);
  if (main_rank)
    for (const std::string& line : log) std::printf("fathom-train: %s\n", line.c_str());
  if (opt.seed) config.seed = *opt.seed;

  const BatchConfig batch = resolve_batch(config.batch, data_size);
  const apps::TrainData data =
      apps::load_train_data(opt.data_path, opt.val_data_path, sizes.block_size, opt.vocab_size,
                                batch.train_batch_size, opt.data_format);
  models::GPTConfig model_config = sizes;
  model_config.vocab_size = data.vocab_size;
  const std::shared_ptr<TokenDataset>& train = data.train;
  const std::shared_ptr<TokenDataset>& val = data.val;

  const Device device = apps::resolve_device(opt.device, runtime.device());
  if (device.is_cpu())
    apps::check_model_fits_in_memory(model_config, config, data_size, runtime.local_size(),
                                         tensor_size * pipeline_size);
  // The process groups: MPI for host tensors and, with a GPU per rank, NCCL for device tensors.
  const parallel::ProcessGroups groups = runtime.groups(pipeline_size, tensor_size);
  // ZeRO stage 3 keeps only each rank's shard: the model is built shard by shard (nn::DeferredInit),
  // each parameter made when it is sharded, so no rank holds it whole (DeepSpeed's zero.Init).
  const bool shard_by_shard = config.zero.stage == 3 && tensor_size == 1 && pipeline_size == 1;
  if (main_rank && shard_by_shard) std::printf("fathom-train: ZeRO stage 3: building the model shard by shard\n");
  const apps::TrainModel model(
      model_config, config.seed.value_or(kDefaultSeed), opt.init_path, shard_by_shard, groups,
      {.sequence_parallel = config.sequence_parallel},
      device,
      {.partition = config.pipeline.partition,
       .chunks = static_cast<int>(config.pipeline.virtual_stages),
       .activation_checkpoint_interval = static_cast<int>(config.pipeline.activation_checkpoint_interval)});
  // DeepSpeed's activation_checkpointing section: every block recomputes in backward.
  if (config.activation_checkpointing.present)
    model.checkpoint_blocks(config.activation_checkpointing.synchronize_checkpoint_boundary,
                            config.activation_checkpointing.partition_activations);
  model.module()->to(device);  // before the engine: its optimizer and ZeRO buffers follow the parameters
  const int64_t parameter_count = model.parameter_count();
  Initialized init = initialize(config, model.module(), nullptr, train, groups);
  Engine& engine = *init.engine;
  engine.set_stop_on_non_finite(!opt.allow_non_finite);
  // Whether stage 3 shards anything: with the default persistence threshold a small model's
  // parameters all stay whole.
  if (const zero::ShardedState* sharded = zero::as_sharded(engine.training_state());
      main_rank && sharded && sharded->gatherer())
    std::printf("fathom-train: ZeRO stage 3: %s\n", sharded->gatherer()->summary().c_str());
  if (resume) {
    engine.load_checkpoint(resume->dir, resume->tag);
    if (main_rank)
      std::printf("fathom-train: resumed from %s/%s at step %lld\n", resume->dir.c_str(), resume->tag.c_str(),
                  static_cast<long long>(engine.global_steps()));
  }
  const std::string client_state =
      apps::train_run_client_state(
          {opt.preset, model_config, opt.data_path, opt.val_data_path, opt.steps, opt.save_every, opt.data_format});
  const std::string checkpoint_dir = (std::filesystem::path(opt.out_dir) / "checkpoints").string();
  // The same validation samples at every layout (apps/train/train_validation.h).
  const int64_t val_samples = opt.eval_batches * engine.options().train_batch_size();

  const int64_t tokens_per_step = engine.options().train_batch_size() * model_config.block_size;
  if (main_rank) {
    std::printf("fathom-train: GPT %s (%lld layers, %lld heads, %lld wide, vocab %lld, block %lld): %.2fM parameters\n",
                opt.preset.c_str(), (long long)model_config.n_layer, (long long)model_config.n_head,
                (long long)model_config.n_embd, (long long)model_config.vocab_size, (long long)model_config.block_size,
                parameter_count / 1e6);
    std::string layout;
    if (pipeline_size > 1) layout += "pipeline " + std::to_string(pipeline_size) + " x ";
    if (tensor_size > 1) layout += "tensor " + std::to_string(tensor_size) + " x ";
    if (!layout.empty()) layout = " (" + layout + "data " + std::to_string(data_size) +
                                  (pipeline_size > 1 ? ", " + config.pipeline.schedule : "") + ")";
    std::printf("fathom-train: data %s: %lld train / %lld val sequences (val: %s); %lld tokens per step; %d rank%s%s x %s\n",
                data.name.c_str(), (long long)train->size(), (long long)val->size(), data.val_source.c_str(),
                (long long)tokens_per_step, runtime.size(), runtime.size() == 1 ? "" : "s", layout.c_str(),
                device.is_cpu() ? (std::to_string(num_threads()) + " threads").c_str() : device.str().c_str());
    std::fflush(stdout);
  }

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  engine.on_step([&](const StepReport& r) {
    const bool last = r.step == opt.steps;
    if (Monitor* monitor = engine.monitor())
      monitor->write_events({{"Train/Samples/tokens_per_second", r.tokens_per_second, r.samples}});
    if (!main_rank) return;
    // After the first step, with the gradients at their peak (they live through backward and the
    // step frees them), so the line adds up to docs/zero.md's totals (16 bytes/parameter at stage 0).
    if (r.step == 1) {
      ModelStateBytes bytes = model_state_bytes();
      bytes.gradients = model_state_bytes(/*peak=*/true).gradients;
      std::printf("memory per rank (gradients at their peak): %s\n", format_model_state_bytes(bytes).c_str());
    }
    if (r.step % std::max<int64_t>(1, engine.options().steps_per_print) != 0 && r.step != 1 && !last) return;
    const double spent = elapsed();
    const double eta = spent / static_cast<double>(r.step) * static_cast<double>(opt.steps - r.step);
    const double mem_gib = static_cast<double>(memory_snapshot(device).total.current) / (1u << 30);
    // fp16: the loss scale and the steps skipped on overflow so far.
    char scale[64] = "";
    if (r.loss_scale != 1.0 || r.skipped_steps > 0)
      std::snprintf(scale, sizeof scale, " | scale 2^%.0f | skipped %lld", std::log2(r.loss_scale),
                    (long long)r.skipped_steps);
    // nvme offload: what the swap files moved during the step and how long it waited for them.
    const std::string io = Engine::format_io(r);
    std::printf("step %lld/%lld | loss %.3f | lr %.1e | %.1fk tok/s | grad norm %.2f%s | mem %.2f GiB%s | %s < %s\n",
                (long long)r.step, (long long)opt.steps, r.loss, r.lr, r.tokens_per_second / 1e3, r.grad_norm, scale,
                mem_gib, io.c_str(), clock_text(spent).c_str(), clock_text(eta).c_str());
    if (engine.options().wall_clock_breakdown)
      for (const std::string& line : Engine::format_timers(r)) std::printf("%s\n", line.c_str());
    for (const std::string& line : r.memory_breakdown) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });

  double last_val = std::nan("");
  StopSignals stop_signals;  // SIGTERM / SIGINT: stop after the current step (engine/stop_signals.h)
  // After each optimizer step: validation, checkpoints, stop requests. An exit code ends the run.
  const auto after_step = [&]() -> std::optional<int> {
    const int64_t step = engine.global_steps();
    if (step == opt.steps || (opt.eval_interval > 0 && step % opt.eval_interval == 0)) {
      last_val = apps::validation_loss(model, *val, val_samples, engine.options().micro_batch_size, groups.data());
      if (Monitor* monitor = engine.monitor())
        monitor->write_events({{"Train/Samples/val_loss", last_val, engine.global_samples()}});
      if (main_rank) std::printf("step %lld/%lld | val loss %.3f\n", (long long)step, (long long)opt.steps, last_val);
      std::fflush(stdout);
    }
    const auto save = [&] {
      engine.save_checkpoint(checkpoint_dir, "", client_state);
      if (main_rank)
        std::printf("step %lld/%lld | checkpoint %s/global_step%lld\n", (long long)step, (long long)opt.steps,
                    checkpoint_dir.c_str(), (long long)step);
    };
    const bool saving = opt.save_every > 0;
    if (saving && (step % opt.save_every == 0 || step == opt.steps)) save();
    kill_if_asked(step, runtime);
    // Preemption: every rank has finished this step; all stop here or none does. After a signal
    // a rank has two steps' time (and 5 s) to get here, or it exits (a peer of it died).
    stop_signals.set_boundary_timeout(5 + 2 * engine.last_report().seconds);
    if (const int signal = stop_signals.stop_requested(runtime.world_ptr().get()); signal && step < opt.steps) {
      if (saving && step % opt.save_every != 0) save();
      if (main_rank) {
        std::printf("fathom-train: stopped by %s after step %lld/%lld; ", StopSignals::name(signal), (long long)step,
                    (long long)opt.steps);
        if (saving) std::printf("continue with --resume %s\n", opt.out_dir.c_str());
        else std::printf("no checkpoint was saved (--save-every N saves one on a stop too)\n");
        std::fflush(stdout);
      }
      return 128 + signal;  // the shell's status for a process ended by that signal
    }
    return std::nullopt;
  };

  if (model.pipeline()) {
    // One whole step per train_batch: the schedule draws the micro-batches (first and last stages).
    std::optional<DataLoader::Iterator> position;
    const NextBatch next = [&] {
      if (!position || *position == std::default_sentinel) position.emplace(init.loader->begin());
      Batch batch = **position;
      ++*position;
      return batch;
    };
    const LossFunction loss = [&](const autograd::Variable& output, const Batch& batch) {
      return model.loss(output, batch.targets.to(device), batch.loss_normaliser);
    };
    while (engine.global_steps() < opt.steps) {
      engine.train_batch(next, loss);
      if (const std::optional<int> code = after_step()) return *code;
    }
  }
  while (engine.global_steps() < opt.steps) {
    for (const Batch& batch : *init.loader) {
      const autograd::Variable logits = engine(autograd::Variable(batch.inputs.to(device)), batch.sample_index);
      engine.backward(model.loss(logits, batch.targets.to(device), batch.loss_normaliser));
      engine.step();
      if (batch.micro_step + 1 < engine.options().gradient_accumulation_steps) continue;
      if (const std::optional<int> code = after_step()) return *code;
      if (engine.global_steps() >= opt.steps) break;
    }
  }

  // Every rank joins the consolidation (ZeRO-3 gathers its shards, a pipeline's stages send
  // theirs to the first); rank 0 writes the model.
  nn::NamedTensors weights = engine.consolidated_state_dict();
  if (model.pipeline()) weights = parallel::gather_to_first_stage(*model.pipeline(), weights);
  if (!main_rank) return 0;
  std::filesystem::create_directories(opt.out_dir);
  const std::string model_path = (std::filesystem::path(opt.out_dir) / "model.safetensors").string();
  models::save_gpt2_safetensors(model.config(), weights, model_path);
  std::ofstream(std::filesystem::path(opt.out_dir) / "config.json") << config.to_json() << "\n";
  std::printf("fathom-train: done in %s: train loss %.3f, val loss %.3f; wrote %s and config.json\n",
              clock_text(elapsed()).c_str(), engine.last_report().loss, last_val, model_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  return apps::run_reporting_errors(runtime, [&] {
    const apps::TrainOptions options = apps::parse_train_options(argc, argv);
    if (options.help) {
      if (runtime.is_main_process()) std::cout << apps::train_usage();
      return 0;
    }
    return run(options, runtime);
  });
}
