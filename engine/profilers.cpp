#include "engine/profilers.h"

#include "core/logging.h"
#include "engine/monitor/flops_profiler.h"
#include "engine/monitor/trace.h"
#include "parallel/comms_logger.h"

namespace fathom {

namespace {

// The parameters of every pipeline stage, a tied weight (GPT's embedding and head, a copy on the
// first and the last stage) once: at its leader. Collective over the pipeline group.
int64_t params_of_all_stages(nn::Module& stage, parallel::Communicator& pipeline) {
  int64_t own = 0;
  for (const auto& [name, param] : stage.named_parameters())
    if (stage.placement(name).tie_leader) own += param.numel();
  return static_cast<int64_t>(pipeline.all_reduce_scalar(static_cast<double>(own)));
}

}  // namespace

void attach_profilers(const Config& config, Engine& engine, const parallel::ProcessGroups& groups, bool first_rank) {
  const int stages = groups.pipeline().size();
  const int64_t all_stages =
      config.flops_profiler.enabled && stages > 1 ? params_of_all_stages(engine.module(), groups.pipeline()) : 0;
  if (config.flops_profiler.enabled && first_rank) {
    const FlopsProfilerConfig& c = config.flops_profiler;
    const ProfiledJob job{groups.data().size() * groups.tensor().size() * stages, groups.data().size(),
                          groups.tensor().size(), engine.options().micro_batch_size, stages, all_stages};
    engine.add_instrument(std::make_unique<FlopsProfiler>(
        engine.module(),
        FlopsProfilerOptions{c.profile_step, c.module_depth, c.top_modules, c.detailed, c.output_file,
                             c.recompute_fwd_factor},
        job));
  }
  if (config.trace.enabled)
    engine.add_instrument(std::make_unique<StepTrace>(
        engine.module(), TraceOptions{config.trace.output_path, config.trace.first_step, config.trace.last_step},
        groups.world_ptr()));
  if (config.comms_logger.enabled) {
    const CommsLoggerConfig& c = config.comms_logger;
    parallel::CommsLoggerOptions options{c.verbose, c.prof_all, c.debug, c.prof_ops};
    // Every rank measures; the first prints (DeepSpeed's logger prints on rank 0 too).
    parallel::CommsLogger::Print print = [first_rank](const std::string& line) {
      if (first_rank) FATHOM_LOG(Info, line);
    };
    engine.set_comms_logger(std::make_shared<parallel::CommsLogger>(options, print), first_rank);
  }
}

}  // namespace fathom
