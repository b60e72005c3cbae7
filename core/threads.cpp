#include "core/threads.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/logging.h"

namespace fathom {
namespace {

int affinity_core_count() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return CPU_COUNT(&mask);
}

int positive_env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 1) {
    FATHOM_LOG(Warning, "ignoring ", name, "=\"", value, "\": expected a positive integer");
    return 0;
  }
  return static_cast<int>(parsed);
}

int initial_threads() {
  if (int requested = positive_env_int("FATHOM_NUM_THREADS")) return requested;
  return default_num_threads(affinity_core_count(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)),
                             local_process_count());
}

std::atomic<int>& thread_setting() {
  static std::atomic<int> threads{initial_threads()};
  return threads;
}

}  // namespace

int default_num_threads(int affinity_cores, int online_cores, int local_processes) {
  if (affinity_cores < online_cores) return std::max(1, affinity_cores);
  return std::max(1, affinity_cores / std::max(1, local_processes));
}

int local_process_count() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (int count = positive_env_int(name)) return count;
  return 1;
}

int num_threads() { return thread_setting().load(std::memory_order_relaxed); }

void set_num_threads(int threads) {
  FATHOM_CHECK(threads >= 1, "set_num_threads: need at least 1 thread, got ", threads);
  thread_setting().store(threads, std::memory_order_relaxed);
}

}  // namespace fathom
