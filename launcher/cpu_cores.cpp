#include "launcher/cpu_cores.h"

#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace fathom::launcher {
namespace {

bool affinity_mask(cpu_set_t& mask) {
  CPU_ZERO(&mask);
  return sched_getaffinity(0, sizeof mask, &mask) == 0;
}

// -1 when the file is missing (no sysfs, or a CPU without topology).
int read_topology_number(int cpu, const char* name) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + name);
  int value = -1;
  in >> value;
  return in ? value : -1;
}

}  // namespace

int online_cores() { return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)); }

int affinity_cores() {
  cpu_set_t mask;
  return affinity_mask(mask) ? CPU_COUNT(&mask) : online_cores();
}

int allowed_physical_cores() {
  cpu_set_t mask;
  if (!affinity_mask(mask)) return online_cores();
  std::set<std::pair<int, int>> cores;  // (package, core): core ids repeat across packages
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    const int package = read_topology_number(cpu, "physical_package_id");
    const int core = read_topology_number(cpu, "core_id");
    if (package < 0 || core < 0) return CPU_COUNT(&mask);
    cores.insert({package, core});
  }
  return cores.empty() ? CPU_COUNT(&mask) : static_cast<int>(cores.size());
}

}  // namespace fathom::launcher
