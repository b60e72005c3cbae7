#include "parallel/compressed_optimizers.h"

#include <cmath>

#include "core/logging.h"
#include "nn/optimizer_params.h"
#include "parallel/onebit_adam.h"

namespace fathom::parallel {

bool is_compressed_optimizer(const std::string& type) { return nn::lower_case(type) == "onebitadam"; }

std::unique_ptr<nn::Optimizer> make_compressed_optimizer(const std::string& type, const nn::OptimizerParams& params,
                                                         std::vector<nn::ParamGroup> groups,
                                                         std::shared_ptr<Communicator> data_group) {
  FATHOM_CHECK(is_compressed_optimizer(type), "\"", type, "\" is not a communication-compressed optimizer");
  const nn::ParamReader read("OneBitAdam", params,
                             {"lr", "betas", "eps", "weight_decay", "freeze_step", "cuda_aware", "comm_backend_name",
                              "amsgrad"});
  read.reject_amsgrad("DeepSpeed's OnebitAdam");
  OneBitAdamOptions options;
  options.lr = read.number("lr", options.lr);
  options.betas = read.betas(options.betas);
  options.eps = read.number("eps", options.eps);
  options.weight_decay = read.number("weight_decay", options.weight_decay);
  const double freeze = read.number("freeze_step", static_cast<double>(options.freeze_step));
  FATHOM_CHECK(freeze >= 0 && freeze == std::floor(freeze), "OneBitAdam: \"freeze_step\" must be a whole number >= 0, got ",
               freeze);
  options.freeze_step = static_cast<int64_t>(freeze);
  // cuda_aware tells DeepSpeed's MPI backend it may pass device buffers; Fathom's compression
  // runs on the host either way, so it changes nothing.
  read.flag("cuda_aware", false);
  const std::string backend = read.choice("comm_backend_name", "nccl", {"nccl", "mpi"});
  if (backend == "nccl" && data_group && std::string(data_group->backend()) != "nccl" && data_group->size() > 1)
    FATHOM_LOG(Info, "OneBitAdam: comm_backend_name \"nccl\" (DeepSpeed's default): the compressed momentum travels "
                     "over this job's ", data_group->backend(), " data-parallel group");
  return std::make_unique<OneBitAdam>(std::move(groups), options, std::move(data_group));
}

}  // namespace fathom::parallel
