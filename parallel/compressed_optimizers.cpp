#include "parallel/compressed_optimizers.h"

#include <cmath>

#include "core/logging.h"
#include "nn/optimizer_params.h"
#include "parallel/onebit_adam.h"
#include "parallel/onebit_lamb.h"
#include "parallel/zero_one_adam.h"

namespace fathom::parallel {

namespace {
// DeepSpeed's spellings compared ignoring case: "OnebitAdam", "OneBitAdam", "onebitadam".
enum class Kind { None, OneBitAdam, ZeroOneAdam, OneBitLamb };
Kind kind_of(const std::string& type) {
  const std::string name = nn::lower_case(type);
  if (name == "onebitadam") return Kind::OneBitAdam;
  if (name == "zerooneadam") return Kind::ZeroOneAdam;
  if (name == "onebitlamb") return Kind::OneBitLamb;
  return Kind::None;
}

// The keys every one of them takes, besides its own.
const std::vector<std::string> kCommonKeys = {"lr", "betas", "eps", "weight_decay", "cuda_aware",
                                              "comm_backend_name", "amsgrad", "bias_correction", "eps_inside_sqrt"};

nn::ParamReader reader(const char* type, const nn::OptimizerParams& params, std::vector<std::string> own) {
  own.insert(own.end(), kCommonKeys.begin(), kCommonKeys.end());
  return nn::ParamReader(type, params, std::move(own));
}

// lr, betas, eps and weight_decay (every Options struct has them), and the keys DeepSpeed takes
// and ignores; then the backend.
template <class Options>
void read_common(const nn::ParamReader& read, Options& options, const std::shared_ptr<Communicator>& data_group) {
  read.reject_amsgrad(("DeepSpeed's " + read.type()).c_str());
  options.lr = read.number("lr", options.lr);
  options.betas = read.betas(options.betas);
  options.eps = read.number("eps", options.eps);
  options.weight_decay = read.number("weight_decay", options.weight_decay);
  // DeepSpeed's default for bias_correction is true, but its update never corrects: say so when
  // a config asks for either explicitly.
  if (read.flag("bias_correction", false) || read.flag("eps_inside_sqrt", false))
    FATHOM_LOG(Info, read.type(), ": \"bias_correction\" and \"eps_inside_sqrt\" change nothing (DeepSpeed's ",
               read.type(), " takes and ignores them too): its update has no bias correction and adds eps outside "
               "the square root");
  // cuda_aware tells DeepSpeed's MPI backend it may pass device buffers; Fathom's compression
  // runs on the host either way, so it changes nothing.
  read.flag("cuda_aware", false);
  // "compressed" is DeepSpeed's accelerator-neutral implementation of the same exchange.
  const std::string backend = read.choice("comm_backend_name", "nccl", {"nccl", "mpi", "compressed"});
  if (backend != "mpi" && data_group && std::string(data_group->backend()) != "nccl" && data_group->size() > 1)
    FATHOM_LOG(Info, read.type(), ": comm_backend_name \"", backend, "\": the compressed messages travel over "
                     "this job's ", data_group->backend(), " data-parallel group");
}

int64_t whole_number(const nn::ParamReader& read, const char* key, int64_t fallback, int64_t min) {
  const double value = read.number(key, static_cast<double>(fallback));
  FATHOM_CHECK(value >= static_cast<double>(min) && value == std::floor(value), read.type(), ": \"", key,
               "\" must be a whole number >= ", min, ", got ", value);
  return static_cast<int64_t>(value);
}

std::unique_ptr<nn::Optimizer> make_onebit_adam(const nn::OptimizerParams& params, std::vector<nn::ParamGroup> groups,
                                                std::shared_ptr<Communicator> data_group) {
  const nn::ParamReader read = reader("OneBitAdam", params, {"freeze_step"});
  OneBitAdamOptions options;
  read_common(read, options, data_group);
  options.freeze_step = whole_number(read, "freeze_step", options.freeze_step, 0);
  return std::make_unique<OneBitAdam>(std::move(groups), options, std::move(data_group));
}

std::unique_ptr<nn::Optimizer> make_zero_one_adam(const nn::OptimizerParams& params, std::vector<nn::ParamGroup> groups,
                                                  std::shared_ptr<Communicator> data_group) {
  const nn::ParamReader read =
      reader("ZeroOneAdam", params, {"var_freeze_step", "var_update_scaler", "local_step_scaler", "local_step_clipper"});
  ZeroOneAdamOptions options;
  read_common(read, options, data_group);
  options.var_freeze_step = whole_number(read, "var_freeze_step", options.var_freeze_step, 0);
  options.var_update_scaler = whole_number(read, "var_update_scaler", options.var_update_scaler, 1);
  options.local_step_scaler = whole_number(read, "local_step_scaler", options.local_step_scaler, 1);
  options.local_step_clipper = whole_number(read, "local_step_clipper", options.local_step_clipper, 1);
  return std::make_unique<ZeroOneAdam>(std::move(groups), options, std::move(data_group));
}

std::unique_ptr<nn::Optimizer> make_onebit_lamb(const nn::OptimizerParams& params, std::vector<nn::ParamGroup> groups,
                                                std::shared_ptr<Communicator> data_group) {
  const nn::ParamReader read = reader("OneBitLamb", params, {"freeze_step", "max_coeff", "min_coeff", "coeff_beta",
                                                             "factor_max", "factor_min", "factor_threshold"});
  OneBitLambOptions options;
  read_common(read, options, data_group);
  options.freeze_step = whole_number(read, "freeze_step", options.freeze_step, 0);
  options.max_coeff = read.number("max_coeff", options.max_coeff);
  options.min_coeff = read.number("min_coeff", options.min_coeff);
  options.coeff_beta = read.number("coeff_beta", options.coeff_beta);
  options.factor_max = read.number("factor_max", options.factor_max);
  options.factor_min = read.number("factor_min", options.factor_min);
  options.factor_threshold = read.number("factor_threshold", options.factor_threshold);
  return std::make_unique<OneBitLamb>(std::move(groups), options, std::move(data_group));
}
}  // namespace

bool is_compressed_optimizer(const std::string& type) { return kind_of(type) != Kind::None; }

std::unique_ptr<nn::Optimizer> make_compressed_optimizer(const std::string& type, const nn::OptimizerParams& params,
                                                         std::vector<nn::ParamGroup> groups,
                                                         std::shared_ptr<Communicator> data_group) {
  switch (kind_of(type)) {
    case Kind::OneBitAdam: return make_onebit_adam(params, std::move(groups), std::move(data_group));
    case Kind::ZeroOneAdam: return make_zero_one_adam(params, std::move(groups), std::move(data_group));
    case Kind::OneBitLamb: return make_onebit_lamb(params, std::move(groups), std::move(data_group));
    case Kind::None: break;
  }
  FATHOM_FAIL("\"", type, "\" is not a communication-compressed optimizer");
}

}  // namespace fathom::parallel
