#pragma once
// fathom-train --resume: a checkpoint written by fathom-train carries the run it belongs to (the
// model's shape, the data, the run's length) in its client state, beside the config the engine
// stores. Resuming takes all of it from there, so `fathom-train --resume DIR` continues the same
// run at any world size without repeating its flags; a flag given anyway wins for the config, the
// data and --steps, and must agree with the checkpoint for the model's shape.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "apps/train/train_options.h"
#include "models/model_spec.h"

namespace fathom::apps {

// What a fathom-train checkpoint records about its run.
struct TrainRun {
  std::string preset;        // the preset, or the --model folder, it started from
  std::string model_dir;
  models::ModelSpec model;
  int64_t sequence_length = 0;
  std::string data_path;      // empty: the built-in corpus
  std::string val_data_path;  // empty: the default validation set
  int64_t steps = 0;
  int64_t save_every = 0;  // --save-every (0: none; also in checkpoints older than the key)
  DataFormat data_format = DataFormat::Auto;
};

// The client state fathom-train saves with each checkpoint: {"fathom-train": {...}}.
std::string train_run_client_state(const TrainRun& run);

// Under `fathom --max_restarts` a relaunched job (FATHOM_RESTART_COUNT > 0) resumes from its own
// latest checkpoint: `options` with --resume set to --out when it has one and no --resume was
// given; `log` says so.
TrainOptions with_restart_resume(TrainOptions options, std::vector<std::string>* log);

// The checkpoint --resume points at, opened before the model exists.
struct ResumePoint {
  std::string dir, tag;         // the checkpoint folder (holding `latest`) and the tag to load
  std::optional<TrainRun> run;  // absent in checkpoints not written by fathom-train
  std::string config_json;      // the config the checkpoint was trained with, as resolved
  int64_t global_steps = 0;
  int world_size = 1;  // its data-parallel ranks (index.json's world_size)
  int tensor_size = 1, pipeline_size = 1;
  std::vector<std::string> parameter_names;  // the saved model's, in its order
  // A GPT-2 saved before GPT-2 became a configuration of the one decoder: its parameters carry
  // the old model's names (transformer.h.N.attn.c_attn, fused q/k/v), which no model has now.
  // fathom-export still reads it (as a Hugging Face GPT-2 folder); fathom-train cannot continue it.
  bool legacy_gpt2() const;
  // "4 ranks: pipeline 2 x tensor 2 x data 1", or "2 ranks" without model parallelism.
  std::string layout() const;
};
ResumePoint open_resume_point(const std::string& resume_dir, const std::string& tag);

// The options of the resumed run: the checkpoint's preset, sizes, data, --steps and --save-every
// where the command line does not give them. Size flags that contradict the checkpoint's model are an
// error naming both shapes.
// `log` gets one line saying what was taken.
TrainOptions resumed_options(const TrainOptions& given, const ResumePoint& point, std::vector<std::string>* log);

// The checkpoint's config for `world` data-parallel ranks: its global batch and accumulation
// kept, the micro-batch derived again, so a resume at another world size is the same job.
// An error naming the numbers when the global batch does not divide over the ranks.
Config resumed_config(const ResumePoint& point, int world, std::vector<std::string>* log);

}  // namespace fathom::apps
