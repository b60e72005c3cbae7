#include "engine/offload_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace fathom {
namespace {

constexpr const char* kKey = "zero_optimization.offload_optimizer";
constexpr const char* kParamKey = "zero_optimization.offload_param";

// <nvme_path> must be an existing, writable directory: Fathom creates only its own
// sub-directories below it, so a typo does not scatter swap files somewhere unexpected.
void check_nvme_path(const std::string& path, const char* key) {
  struct stat info {};
  FATHOM_CHECK(::stat(path.c_str(), &info) == 0, "config error at ", key, ".nvme_path: \"", path,
               "\" does not "
               "exist; create it (a directory on a fast local disk, e.g. an NVMe mount) or point nvme_path at one");
  FATHOM_CHECK(S_ISDIR(info.st_mode), "config error at ", key, ".nvme_path: \"", path,
               "\" is not a directory; "
               "point nvme_path at a directory on a fast local disk");
  FATHOM_CHECK(::access(path.c_str(), W_OK | X_OK) == 0, "config error at ", key, ".nvme_path: \"", path,
               "\" is not writable by this process; fix its permissions or point nvme_path at a writable directory");
}

// The job's directory name: FATHOM_JOB_NAME, or the first rank's process id (unique on its host
// while the job runs; every rank gets the same one).
std::string job_name(const parallel::ProcessGroups& groups) {
  if (const char* name = std::getenv("FATHOM_JOB_NAME"); name != nullptr && *name != '\0') return name;
  Tensor pid = Tensor::empty({1}, DType::I64);
  pid.data<int64_t>()[0] = static_cast<int64_t>(::getpid());
  groups.world_ptr()->broadcast(pid, 0);
  return "job" + std::to_string(pid.data<int64_t>()[0]);
}

zero::OptimizerOffload::Tier tier_of(const std::string& device) {
  if (device == "cpu") return zero::OptimizerOffload::Tier::Host;
  if (device == "nvme") return zero::OptimizerOffload::Tier::Nvme;
  return zero::OptimizerOffload::Tier::Device;
}

offload::AioOptions aio_of(const Config& config) {
  return {.block_size = config.aio.block_size,
          .queue_depth = config.aio.queue_depth,
          .intra_op_parallelism = config.aio.intra_op_parallelism,
          .single_submit = config.aio.single_submit,
          .overlap_events = config.aio.overlap_events};
}

std::string swap_directory(const std::string& nvme_path, const std::string& job, const parallel::ProcessGroups& groups) {
  return nvme_path + "/" + job + "/rank" + std::to_string(groups.world_ptr()->rank());
}

zero::OptimizerOffload optimizer_offload(const Config& config, const parallel::ProcessGroups& groups,
                                         const std::string& job) {
  const OffloadOptimizerConfig& c = config.zero.offload_optimizer;
  zero::OptimizerOffload offload;
  offload.tier = tier_of(c.device);
  offload.sub_group_elements = config.zero.sub_group_size;  // > 0: zero::OptimizerShard checks it
  if (offload.tier == zero::OptimizerOffload::Tier::Device) return offload;
  FATHOM_CHECK(config.zero.stage >= 1, "config error at ", kKey, ".device: \"", c.device,
               "\" offloads ZeRO's "
               "optimizer shard, but zero_optimization.stage is 0; use stage 1, 2 or 3");
  FATHOM_CHECK(c.ratio == 1.0 || config.zero.stage == 3, "config error at ", kKey, ".ratio: ", c.ratio,
               " (a partial "
               "offload) needs zero_optimization.stage 3, as in DeepSpeed; stage is ",
               config.zero.stage, ", use ratio 1.0");
  offload.pin_memory = c.pin_memory;
  offload.ratio = c.ratio;
  if (offload.tier == zero::OptimizerOffload::Tier::Nvme) {
    check_nvme_path(c.nvme_path, kKey);
    offload.swap_directory = swap_directory(c.nvme_path, job, groups);
    offload.buffer_count = c.buffer_count;
    offload.pipeline_read = c.pipeline_read;
    offload.pipeline_write = c.pipeline_write;
  }
  offload.aio = aio_of(config);
  return offload;
}

// Stage 3 only: the config parser refuses offload_param below it, naming the stage.
zero::ParameterOffload parameter_offload(const Config& config, const parallel::ProcessGroups& groups,
                                         const std::string& job) {
  const OffloadParamConfig& c = config.zero.offload_param;
  zero::ParameterOffload offload;
  offload.tier = tier_of(c.device);
  offload.pin_memory = c.pin_memory;
  if (offload.tier != zero::ParameterOffload::Tier::Nvme) return offload;
  check_nvme_path(c.nvme_path, kParamKey);
  offload.swap_directory = swap_directory(c.nvme_path, job, groups);
  offload.buffer_count = c.buffer_count;
  offload.buffer_elements = c.buffer_size;
  offload.max_in_cpu = c.max_in_cpu;
  offload.aio = aio_of(config);
  return offload;
}

}  // namespace

OffloadPlacement offload_placement(const Config& config, const parallel::ProcessGroups& groups) {
  const bool swaps = config.zero.offload_optimizer.device == "nvme" || config.zero.offload_param.device == "nvme";
  const std::string job = swaps ? job_name(groups) : "";
  return {optimizer_offload(config, groups, job), parameter_offload(config, groups, job)};
}

}  // namespace fathom
