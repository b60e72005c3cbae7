#include "parallel/compressed_optimizers.h"

#include <cmath>

#include "core/logging.h"
#include "nn/optimizer_params.h"
#include "parallel/onebit_adam.h"
#include "parallel/zero_one_adam.h"

namespace fathom::parallel {

bool is_compressed_optimizer(const std::string& type) {
  const std::string name = nn::lower_case(type);
  return name == "onebitadam" || name == "zerooneadam";
}

namespace {
// DeepSpeed's backend choice, and its cuda_aware flag, for either optimizer.
void read_backend(const nn::ParamReader& read, const std::shared_ptr<Communicator>& data_group) {
  // cuda_aware tells DeepSpeed's MPI backend it may pass device buffers; Fathom's compression
  // runs on the host either way, so it changes nothing.
  read.flag("cuda_aware", false);
  const std::string backend = read.choice("comm_backend_name", "nccl", {"nccl", "mpi"});
  if (backend == "nccl" && data_group && std::string(data_group->backend()) != "nccl" && data_group->size() > 1)
    FATHOM_LOG(Info, read.type(), ": comm_backend_name \"nccl\" (DeepSpeed's default): the compressed messages "
                     "travel over this job's ", data_group->backend(), " data-parallel group");
}

int64_t whole_number(const nn::ParamReader& read, const char* key, int64_t fallback, int64_t min) {
  const double value = read.number(key, static_cast<double>(fallback));
  FATHOM_CHECK(value >= static_cast<double>(min) && value == std::floor(value), read.type(), ": \"", key,
               "\" must be a whole number >= ", min, ", got ", value);
  return static_cast<int64_t>(value);
}

std::unique_ptr<nn::Optimizer> make_zero_one_adam(const nn::OptimizerParams& params, std::vector<nn::ParamGroup> groups,
                                                  std::shared_ptr<Communicator> data_group) {
  const nn::ParamReader read("ZeroOneAdam", params,
                             {"lr", "betas", "eps", "weight_decay", "var_freeze_step", "var_update_scaler",
                              "local_step_scaler", "local_step_clipper", "cuda_aware", "comm_backend_name", "amsgrad"});
  read.reject_amsgrad("DeepSpeed's ZeroOneAdam");
  ZeroOneAdamOptions options;
  options.lr = read.number("lr", options.lr);
  options.betas = read.betas(options.betas);
  options.eps = read.number("eps", options.eps);
  options.weight_decay = read.number("weight_decay", options.weight_decay);
  options.var_freeze_step = whole_number(read, "var_freeze_step", options.var_freeze_step, 0);
  options.var_update_scaler = whole_number(read, "var_update_scaler", options.var_update_scaler, 1);
  options.local_step_scaler = whole_number(read, "local_step_scaler", options.local_step_scaler, 1);
  options.local_step_clipper = whole_number(read, "local_step_clipper", options.local_step_clipper, 1);
  read_backend(read, data_group);
  return std::make_unique<ZeroOneAdam>(std::move(groups), options, std::move(data_group));
}
}  // namespace

std::unique_ptr<nn::Optimizer> make_compressed_optimizer(const std::string& type, const nn::OptimizerParams& params,
                                                         std::vector<nn::ParamGroup> groups,
                                                         std::shared_ptr<Communicator> data_group) {
  FATHOM_CHECK(is_compressed_optimizer(type), "\"", type, "\" is not a communication-compressed optimizer");
  if (nn::lower_case(type) == "zerooneadam") return make_zero_one_adam(params, std::move(groups), std::move(data_group));
  const nn::ParamReader read("OneBitAdam", params,
                             {"lr", "betas", "eps", "weight_decay", "freeze_step", "cuda_aware", "comm_backend_name",
                              "amsgrad"});
  read.reject_amsgrad("DeepSpeed's OnebitAdam");
  OneBitAdamOptions options;
  options.lr = read.number("lr", options.lr);
  options.betas = read.betas(options.betas);
  options.eps = read.number("eps", options.eps);
  options.weight_decay = read.number("weight_decay", options.weight_decay);
  options.freeze_step = whole_number(read, "freeze_step", options.freeze_step, 0);
  read_backend(read, data_group);
  return std::make_unique<OneBitAdam>(std::move(groups), options, std::move(data_group));
}

}  // namespace fathom::parallel
