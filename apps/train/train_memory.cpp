#include "apps/train/train_memory.h"

#include <unistd.h>

#include <cstdio>

#include "core/error.h"
#include "zero/memory_estimate.h"

namespace fathom::apps {
namespace {

double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

std::string gib_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", gib(bytes));
  return text;
}

}  // namespace

void check_model_fits_in_memory(int64_t model_parameters, const Config& config, int world_size, int ranks_here,
                                int tensor_parallel_size) {
  // States on nvme are not in memory: the swap files' bounds (buffer_count, max_in_cpu) hold instead.
  if (config.zero.offload_optimizer.device == "nvme" || config.zero.offload_param.device == "nvme") return;
  const int64_t parameters = model_parameters / tensor_parallel_size;  // per tensor-parallel rank
  const DType dtype = config.bf16.enabled ? DType::BF16 : config.fp16.enabled ? DType::F16 : DType::F32;
  const int stage = static_cast<int>(config.zero.stage);
  const zero::ModelStateEstimate estimate = zero::estimate_model_states(
      {parameters, world_size, dtype, stage, zero::parse_optimizer_kind(config.optimizer.type)});
  const double machine = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const double needed = static_cast<double>(estimate.total) * ranks_here;
  FATHOM_CHECK(needed <= machine, "the model has ", parameters, " parameters",
               tensor_parallel_size > 1 ? " per tensor-parallel rank" : "", ", whose model states need about ",
               gib_text(static_cast<double>(estimate.total)), " per rank (ZeRO stage ", stage, ", ", world_size,
               world_size == 1 ? " rank" : " ranks", "; fathom-estimate-memory --params ", parameters,
               " gives the table), ", gib_text(needed), " for the ", ranks_here, ranks_here == 1 ? " rank" : " ranks",
               " on this machine, which has ", gib_text(machine),
               "; use a smaller model, or a higher ZeRO stage over more ranks");
}

}  // namespace fathom::apps
