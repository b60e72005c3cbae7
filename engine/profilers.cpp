#include "engine/profilers.h"

#include "core/logging.h"

namespace fathom {

void attach_profilers(const Config& config, Engine& engine, const parallel::ProcessGroups& groups, bool first_rank) {
  (void)groups;
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
