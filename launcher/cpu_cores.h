#pragma once
// Counting this machine's cores the ways the launcher and fathom-report need.

namespace fathom::launcher {

// Logical CPUs online.
int online_cores();
// Logical CPUs in this process's affinity mask (what a container or taskset allows).
int affinity_cores();
// Physical cores among the affinity mask's CPUs (hyper-threads of one core count once): what
// Open MPI counts as this machine's slots, so more local ranks than this need --oversubscribe.
// Falls back to affinity_cores() when sysfs has no topology.
int allowed_physical_cores();

}  // namespace fathom::launcher
