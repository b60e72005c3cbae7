#pragma once
// Internal to the config: one table of keys (engine/config/fields.h) and one parser per section
// of a ds_config (sections.cpp, profiling.cpp, zero.cpp, config.cpp). Each parser reads its object
// with ConfigSection, so its errors name the key path; Config::to_json writes from the same tables.

#include "engine/config/config.h"
#include "engine/config/fields.h"
#include "engine/config/section.h"

namespace fathom {

// The tables of keys (engine/config/fields.h). The top level's, in json.cpp, holds every
// top-level key Fathom reads; parse_config reads those with code of their own (the sections...).
extern const std::vector<Field<Config>> kTopLevelFields;
extern const std::vector<Field<Fp16Config>> kFp16Fields;
extern const std::vector<Field<Bf16Config>> kBf16Fields;
extern const std::vector<Field<MonitorConfig>> kMonitorFields;  // tensorboard, csv_monitor
extern const std::vector<Field<FlopsProfilerConfig>> kFlopsProfilerFields;
extern const std::vector<Field<CommsLoggerConfig>> kCommsLoggerFields;
extern const std::vector<Field<TraceConfig>> kTraceFields;
extern const std::vector<Field<ActivationCheckpointingConfig>> kActivationCheckpointingFields;
extern const std::vector<Field<PipelineConfig>> kPipelineFields;
extern const std::vector<Field<HybridEngineConfig>> kHybridEngineFields;
extern const std::vector<Field<AioConfig>> kAioFields;
extern const std::vector<Field<OffloadParamConfig>> kOffloadParamFields;
extern const std::vector<Field<OffloadOptimizerConfig>> kOffloadOptimizerFields;
extern const std::vector<Field<ZeroConfig>> kZeroFields;

// The whole config from its tree (Config::from_file / from_string), and a file's tree.
Config parse_config(const ConfigNode& root, const std::string& source);
ConfigNode read_config_file(const std::string& path);

Fp16Config parse_fp16(const ConfigSection& section);
Bf16Config parse_bf16(const ConfigSection& section);
MonitorConfig parse_monitor(const ConfigSection& section);
CommsLoggerConfig parse_comms_logger(const ConfigSection& section);
TraceConfig parse_trace(const ConfigSection& section);
// DeepSpeed's deprecated spellings inside the section are mapped, each with a line in `notices`.
// The top-level "aio" block.
AioConfig parse_aio(const ConfigSection& section, std::vector<std::string>& notices);
ZeroConfig parse_zero(const ConfigSection& section, std::vector<std::string>& notices);
// "config notice at <path> (line N): <what>" — a key read differently from how it is written.
std::string config_notice(const ConfigSection& section, const std::string& key, const std::string& what);
OptimizerConfig parse_optimizer(const ConfigSection& section);
// `base_lr`: the optimizer's lr (the schedule is built once here to check its params).
SchedulerConfig parse_scheduler(const ConfigSection& section, double base_lr);

}  // namespace fathom
