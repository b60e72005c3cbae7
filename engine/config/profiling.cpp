// The "flops_profiler", "comms_logger" and "trace" sections (docs/monitoring.md).

#include "engine/config/parse.h"
#include "parallel/communicator.h"

namespace fathom {

const std::vector<Field<FlopsProfilerConfig>> kFlopsProfilerFields = {
    {"enabled", &FlopsProfilerConfig::enabled},
    {"profile_step", &FlopsProfilerConfig::profile_step, {0}},
    {"module_depth", &FlopsProfilerConfig::module_depth, {-1}},
    {"top_modules", &FlopsProfilerConfig::top_modules, {1}},
    {"detailed", &FlopsProfilerConfig::detailed},
    {"output_file", &FlopsProfilerConfig::output_file},
    {"recompute_fwd_factor", &FlopsProfilerConfig::recompute_fwd_factor, {0.0, 1.0}}};

const std::vector<Field<CommsLoggerConfig>> kCommsLoggerFields = {
    {"enabled", &CommsLoggerConfig::enabled},
    {"verbose", &CommsLoggerConfig::verbose},
    {"prof_all", &CommsLoggerConfig::prof_all},
    {"debug", &CommsLoggerConfig::debug},
    {"prof_ops", [](auto& w, auto key, auto& c) {
       w.key(key).begin_array(JsonWriter::Layout::Inline);
       for (const std::string& op : c.prof_ops) w.value(op);
       w.end_array();
     }}};

CommsLoggerConfig parse_comms_logger(const ConfigSection& s) {
  CommsLoggerConfig c = read_section(s, kCommsLoggerFields);
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

const std::vector<Field<TraceConfig>> kTraceFields = {
    {"enabled", &TraceConfig::enabled},
    {"output_path", &TraceConfig::output_path},
    {"steps", [](auto& w, auto key, auto& c) {
       w.key(key).begin_array(JsonWriter::Layout::Inline).value(c.first_step).value(c.last_step).end_array();
     }}};

TraceConfig parse_trace(const ConfigSection& s) {
  TraceConfig c = read_section(s, kTraceFields);
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
