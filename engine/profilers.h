#pragma once
// The config's profiling sections attached to an engine (fathom::initialize calls this):
// "comms_logger" on every rank (each measures its own collectives; the first rank prints),
// "flops_profiler" on the first rank, "trace" on every rank (one file, written by the first).

#include "engine/config/config.h"
#include "engine/engine.h"
#include "parallel/topology.h"

namespace fathom {

void attach_profilers(const Config& config, Engine& engine, const parallel::ProcessGroups& groups, bool first_rank);

}  // namespace fathom
