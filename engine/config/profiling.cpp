// The "flops_profiler", "comms_logger" and "trace" sections (docs/monitoring.md).

#include "engine/config/parse.h"
#include "parallel/communicator.h"

namespace fathom {

FlopsProfilerConfig parse_flops_profiler(const ConfigSection& s) {
  s.check_keys({"enabled", "profile_step", "module_depth", "top_modules", "detailed", "output_file",
                "recompute_fwd_factor"});
  FlopsProfilerConfig c;
  c.enabled = s.boolean("enabled", c.enabled);
  c.profile_step = s.integer("profile_step", c.profile_step, 0);
  c.module_depth = s.integer("module_depth", c.module_depth, -1);
  c.top_modules = s.integer("top_modules", c.top_modules, 1);
  c.detailed = s.boolean("detailed", c.detailed);
  c.output_file = s.string("output_file", c.output_file);
  c.recompute_fwd_factor = s.number("recompute_fwd_factor", c.recompute_fwd_factor, 0.0, 1.0);
  return c;
}

CommsLoggerConfig parse_comms_logger(const ConfigSection& s) {
  s.check_keys({"enabled", "verbose", "prof_all", "debug", "prof_ops"});
  CommsLoggerConfig c;
  c.enabled = s.boolean("enabled", c.enabled);
  c.verbose = s.boolean("verbose", c.verbose);
  c.prof_all = s.boolean("prof_all", c.prof_all);
  c.debug = s.boolean("debug", c.debug);
  c.prof_ops = s.strings("prof_ops");
  std::string names;
  for (int k = 0; k <= static_cast<int>(parallel::CollectiveKind::Barrier); ++k)
    names += std::string(names.empty() ? "" : ", ") + parallel::collective_name(static_cast<parallel::CollectiveKind>(k));
  for (const std::string& op : c.prof_ops) {
    bool known = false;
    for (int k = 0; k <= static_cast<int>(parallel::CollectiveKind::Barrier); ++k)
      known = known || op == parallel::collective_name(static_cast<parallel::CollectiveKind>(k));
    if (!known) s.fail("prof_ops", "\"" + op + "\" is not a collective; name some of: " + names);
  }
  if (c.enabled && !c.prof_all && c.prof_ops.empty())
    s.fail("prof_ops", "is empty while prof_all is false, so nothing would be logged; list ops or set prof_all");
  return c;
}

TraceConfig parse_trace(const ConfigSection& s) {
  s.check_keys({"enabled", "output_path", "steps"});
  TraceConfig c;
  c.enabled = s.boolean("enabled", c.enabled);
  c.output_path = s.string("output_path", c.output_path);
  if (s.find("steps")) {
    const std::vector<int64_t> steps = s.integers("steps", 1);
    if (steps.size() != 2 || steps[0] > steps[1])
      s.fail("steps", "expected [first, last] with first <= last (1-based step numbers), e.g. [2, 3]");
    c.first_step = steps[0];
    c.last_step = steps[1];
  }
  return c;
}

}  // namespace fathom
