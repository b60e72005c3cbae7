// fathom-train: trains a decoder language model — GPT-2, or Llama, Qwen2 or Mistral from a preset
// or a Hugging Face model folder (--model). With no arguments it trains a small byte-level GPT on
// the built-in corpus (Fathom's own docs and sources) — nothing to download, any directory.
//
//   fathom-train [--config ds_config.json] [--data FILE] [--arch llama] [--preset small] [--steps N] [--out DIR]
//   fathom-train --model DIR [--data FILE] ...
//
// It prints a progress line every steps_per_print steps, evaluates the validation loss every
// --eval-interval steps, and writes the model to --out as a Hugging Face folder (config.json and
// safetensors, which transformers' from_pretrained loads) beside the DeepSpeed config as it ran
// (ds_config.json).
// Under `mpirun -np N` (or the fathom launcher) the same command trains data-parallel on N
// ranks with the same global batch; rank 0 prints and writes. With the config's
// tensor_parallel.autotp_size = t, the N ranks are t-way tensor parallel x N/t data parallel;
// with pipeline.stages = p, p pipeline stages x N/p data parallel (docs/pipeline_parallel.md).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "apps/job_errors.h"
#include "apps/train/train_data.h"
#include "apps/train/train_loop.h"
#include "apps/train/train_memory.h"
#include "apps/train/train_model.h"
#include "apps/train/train_options.h"
#include "apps/train/train_plan.h"
#include "apps/train/train_progress.h"
#include "apps/train/train_resume.h"
#include "core/threads.h"
#include "engine/initialize.h"
#include "parallel/pipeline_transport.h"
#include "parallel/runtime.h"
#include "zero/sharded_state.h"

using namespace fathom;

namespace {

int run(const apps::TrainOptions& command_line, const parallel::Runtime& runtime) {
  const bool main_rank = runtime.is_main_process();
  // 1. The plan: options, the checkpoint to resume, the config as it will run, the ranks' layout.
  const std::optional<apps::TrainPlan> plan = apps::plan_training(command_line, runtime);
  if (!plan) return 0;  // the checkpoint already reached --steps
  const apps::TrainOptions& opt = plan->options;
  const Config& config = plan->config;
  if (opt.threads > 0) set_num_threads(opt.threads);

  // 2. The data, which decides the model's vocabulary.
  const BatchConfig batch = resolve_batch(config.batch, plan->data_size);
  // A --model folder fixes the vocabulary; the data's tokens must fit it.
  const bool vocab_fixed = !opt.model_dir.empty();
  models::ModelSpec model_spec = plan->model;
  const apps::TrainData data =
      apps::load_train_data(opt.data_path, opt.val_data_path, plan->sequence_length,
                            vocab_fixed ? model_spec.vocab_size() : opt.vocab_size, batch.train_batch_size, opt.data_format);
  if (vocab_fixed)
    FATHOM_CHECK(data.vocab_size <= model_spec.vocab_size(), "the data's vocabulary of ", data.vocab_size,
                 " tokens does not fit the model's ", model_spec.vocab_size(), " (", opt.model_dir, ")");
  else
    model_spec.set_vocab_size(data.vocab_size);

  // 3. The model, on this rank's device, split as the layout says.
  const Device device = apps::resolve_device(opt.device, runtime.device());
  if (device.is_cpu())
    apps::check_model_fits_in_memory(model_spec.parameter_count(), config, plan->data_size, runtime.local_size(),
                                     plan->tensor_size * plan->pipeline_size);
  // The process groups: MPI for host tensors and, with a GPU per rank, NCCL for device tensors.
  const parallel::ProcessGroups groups = runtime.groups(plan->pipeline_size, plan->tensor_size);
  // ZeRO stage 3 keeps only each rank's shard: the model is built shard by shard (nn::DeferredInit),
  // each parameter made when it is sharded, so no rank holds it whole (DeepSpeed's zero.Init).
  const bool shard_by_shard = config.zero.stage == 3 && plan->tensor_size == 1 && plan->pipeline_size == 1;
  if (main_rank && shard_by_shard) std::printf("fathom-train: ZeRO stage 3: building the model shard by shard\n");
  // Weights to start from: a --model folder's or an --init file's (a resumed run's come from its checkpoint).
  const std::string start_from = plan->resume ? "" : !opt.model_dir.empty() ? opt.model_dir : opt.init_path;
  const apps::TrainModel model(
      model_spec, config.seed.value_or(kDefaultSeed), start_from, shard_by_shard, groups,
      config.sequence_parallel, device,
      {.partition = config.pipeline.partition,
       .chunks = static_cast<int>(config.pipeline.virtual_stages),
       .activation_checkpoint_interval = static_cast<int>(config.pipeline.activation_checkpoint_interval)});
  // DeepSpeed's activation_checkpointing section: every block recomputes in backward.
  if (config.activation_checkpointing.present)
    model.checkpoint_blocks(config.activation_checkpointing.synchronize_checkpoint_boundary,
                            config.activation_checkpointing.partition_activations);
  model.module()->to(device);  // before the engine: its optimizer and ZeRO buffers follow the parameters

  // 4. The engine over it, resumed from the checkpoint.
  Initialized init = initialize(config, model.module(), nullptr, data.train, groups);
  Engine& engine = *init.engine;
  engine.set_stop_on_non_finite(!opt.allow_non_finite);
  // Whether stage 3 shards anything: with the default persistence threshold a small model's
  // parameters all stay whole.
  if (const zero::ShardedState* sharded = zero::as_sharded(engine.training_state());
      main_rank && sharded && sharded->gatherer())
    std::printf("fathom-train: ZeRO stage 3: %s\n", sharded->gatherer()->summary().c_str());
  if (const std::optional<apps::ResumePoint>& resume = plan->resume) {
    engine.load_checkpoint(resume->dir, resume->tag);
    if (main_rank)
      std::printf("fathom-train: resumed from %s/%s at step %lld\n", resume->dir.c_str(), resume->tag.c_str(),
                  static_cast<long long>(engine.global_steps()));
  }
  if (main_rank)
    apps::print_run_header(*plan, model_spec, model.parameter_count(), data,
                           engine.options().train_batch_size() * plan->sequence_length, runtime.size(), device);

  // 5. The loop: steps to --steps, with validation, checkpoints and stop signals between them.
  const apps::ProgressLine progress(engine, opt.steps, main_rank, device);
  engine.on_step([&progress](const StepReport& report) { progress(report); });
  apps::TrainLoop loop(engine, *init.loader, model, opt, data, groups, runtime,
                       apps::train_run_client_state({opt.preset, opt.model_dir, model_spec, plan->sequence_length,
                                                     opt.data_path, opt.val_data_path, opt.steps, opt.save_every,
                                                     opt.data_format}),
                       device);
  if (const std::optional<int> stopped = loop.run()) return *stopped;

  // 6. The model: every rank joins the consolidation (ZeRO-3 gathers its shards, a pipeline's
  // stages send theirs to the first); rank 0 writes it and the config as it ran.
  nn::NamedTensors weights = engine.consolidated_state_dict();
  if (model.pipeline()) weights = parallel::gather_to_first_stage(*model.pipeline(), weights);
  if (!main_rank) return 0;
  // A Hugging Face model folder: the model's config.json and weights; the DeepSpeed config beside them.
  const std::string model_path = model_spec.save(weights, opt.out_dir);
  std::ofstream(std::filesystem::path(opt.out_dir) / "ds_config.json") << config.to_json() << "\n";
  std::printf("fathom-train: done in %s: train loss %.3f, val loss %.3f; wrote %s, config.json and ds_config.json\n",
              apps::clock_text(progress.elapsed()).c_str(), engine.last_report().loss, loop.last_val_loss(),
              model_path.c_str());
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
