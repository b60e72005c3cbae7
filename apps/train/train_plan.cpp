#include "apps/train/train_plan.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/train/train_config.h"
#include "apps/train/train_output.h"
#include "core/error.h"

namespace fathom::apps {

std::optional<TrainPlan> plan_training(const TrainOptions& command_line, const parallel::Runtime& runtime) {
  const bool main_rank = runtime.is_main_process();
  std::vector<std::string> log;
  TrainPlan plan;
  const TrainOptions given = with_restart_resume(command_line, &log);
  // --resume: the run's model, data, length and config come from the checkpoint unless given.
  if (!given.resume_dir.empty()) plan.resume = open_resume_point(given.resume_dir, given.resume_tag);
  const std::optional<ResumePoint>& resume = plan.resume;
  plan.options = resume ? resumed_options(given, *resume, &log) : given;
  const TrainOptions& opt = plan.options;
  if (resume && resume->global_steps >= opt.steps) {
    if (main_rank)
      std::printf("fathom-train: the checkpoint %s/%s is at step %lld and the run ends at --steps %lld: nothing left "
                  "to train (pass a larger --steps to go on)\n", resume->dir.c_str(), resume->tag.c_str(),
                  static_cast<long long>(resume->global_steps), static_cast<long long>(opt.steps));
    return std::nullopt;
  }
  prepare_out_dir(opt, resume, main_rank);
  // Resuming: the checkpoint's model (a --model folder's architecture and sizes come with it).
  plan.model = resume && resume->run ? resume->run->model : opt.model_spec();
  plan.model.set_attention(opt.attention);
  plan.sequence_length = opt.sequence_length(plan.model);

  // The tensor-parallel size decides the data-parallel one, which the batch sizes resolve for.
  const bool config_from_checkpoint = resume && opt.config_path.empty();
  const int tensor_size =
      config_from_checkpoint
          ? static_cast<int>(Config::from_string(resume->config_json, ConfigFormat::Json).tensor_parallel_size)
          : config_tensor_parallel_size(opt.config_path);
  FATHOM_CHECK(runtime.size() % tensor_size == 0, "tensor_parallel.autotp_size is ", tensor_size, " but the job has ",
               runtime.size(), runtime.size() == 1 ? " rank" : " ranks", ", which ", tensor_size,
               " does not divide; launch a multiple of ", tensor_size, " processes or change autotp_size");
  const int pipeline_size =
      config_from_checkpoint
          ? static_cast<int>(std::max<int64_t>(1, Config::from_string(resume->config_json, ConfigFormat::Json).pipeline.stages))
          : config_pipeline_stages(opt.config_path);
  FATHOM_CHECK(runtime.size() % (tensor_size * pipeline_size) == 0, "pipeline.stages is ", pipeline_size,
               tensor_size > 1 ? detail::concat(" and tensor_parallel.autotp_size ", tensor_size) : std::string(),
               " but the job has ", runtime.size(), runtime.size() == 1 ? " rank" : " ranks", ", which ",
               pipeline_size * tensor_size, " does not divide; launch a multiple of ", pipeline_size * tensor_size,
               " processes or change the config");
  plan.tensor_size = tensor_size;
  plan.pipeline_size = pipeline_size;
  plan.data_size = runtime.size() / (tensor_size * pipeline_size);
  plan.config = config_from_checkpoint ? resumed_config(*resume, plan.data_size, &log)
                                       : train_config(opt.config_path, plan.model.hidden_size(), opt.steps, plan.data_size, &log);
  if (main_rank)
    for (const std::string& line : log) std::printf("fathom-train: %s\n", line.c_str());
  if (opt.seed) plan.config.seed = *opt.seed;
  return plan;
}

}  // namespace fathom::apps
