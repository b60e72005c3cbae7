#pragma once
// fathom-train's own settings, shared with fathom-config check: its built-in config (what a
// --config lacks is filled from it) and the values it gives a config's "auto" keys.

#include <cstdint>
#include <string>

#include "engine/config/config.h"
#include "engine/config/auto_values.h"
#include "engine/config/check.h"

namespace fathom::apps {

// The built-in schedule spans the run: --steps fills total_num_steps, and the warm-up is a tenth
// of it, 2 to 20 steps (WarmupCosineLR wants at least 2, and a cosine phase of nonzero length).
int64_t builtin_warmup_steps(int64_t steps);
// The built-in config for a run of `steps` optimizer steps.
Config builtin_train_config(int64_t steps);

// The values fathom-train gives a config's "auto" keys, as the Hugging Face Trainer's DeepSpeed
// integration derives them from its own arguments: batch sizes and accumulation from fathom-train's
// built-in config and the world size, the optimizer's and schedule's settings from its defaults
// and --steps, fp16/bf16 from its precision (f32), the bucket sizes from the model's width.
AutoValues train_auto_values(const Config& defaults, int64_t hidden, int64_t steps, int world);

// The config fathom-train runs from `path` (the built-in one when empty): every problem of the
// file at once as one error, "auto" filled, and the optimizer and scheduler sections it lacks
// taken from the built-in config. `log` gets one line per value that did not come from the file.
// The config file's tensor_parallel.autotp_size (1 without a file, or when 0 or 1): read before
// the rest, since it decides the data-parallel size the batch sizes resolve for.
int config_tensor_parallel_size(const std::string& path);
// Likewise pipeline.stages (1 without a file, or when "auto", DeepSpeed's default).
int config_pipeline_stages(const std::string& path);

Config train_config(const std::string& path, int64_t hidden, int64_t steps, int world,
                    std::vector<std::string>* log);
// The second half of train_config, for a check that passed: the "auto" lines and the missing
// sections from `defaults`.
Config finish_train_config(const ConfigCheck& check, const Config& defaults, std::vector<std::string>* log);

}  // namespace fathom::apps
