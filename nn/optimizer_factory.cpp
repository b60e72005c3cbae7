#include "nn/optimizer_factory.h"

#include "nn/optimizer_params.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

#include "core/logging.h"
#include "nn/adam.h"
#include "core/did_you_mean.h"
#include "nn/lamb.h"
#include "nn/lion.h"
#include "nn/sgd.h"

namespace fathom::nn {
namespace {


std::unique_ptr<Optimizer> make_adam(const std::string& name, const ParamReader& read, std::vector<ParamGroup> groups) {
  read.reject_amsgrad("DeepSpeed's FusedAdam");
  AdamOptions options;
  options.lr = read.number("lr", options.lr);
  options.betas = read.betas(options.betas);
  options.eps = read.number("eps", options.eps);
  options.weight_decay = read.number("weight_decay", options.weight_decay);
  options.bias_correction = read.flag("bias_correction", options.bias_correction);
  options.adam_w_mode = read.flag("adam_w_mode", true);
  // torch_adam picks torch.optim.Adam(W) in DeepSpeed: the same function, so the fused kernel serves both.
  read.flag("torch_adam", false);
  if (name == "AdamW") {
    if (!options.adam_w_mode)
      FATHOM_LOG(Warning, "AdamW: \"adam_w_mode\": false is ignored (DeepSpeed's AdamW always decouples weight "
                          "decay); use type \"Adam\" with \"adam_w_mode\": false for L2 regularisation");
    return std::make_unique<AdamW>(std::move(groups), options);
  }
  return std::make_unique<Adam>(std::move(groups), options);
}

std::unique_ptr<Optimizer> make_sgd(const ParamReader& read, std::vector<ParamGroup> groups) {
  SgdOptions options;
  options.lr = read.number("lr", options.lr);
  options.momentum = read.number("momentum", options.momentum);
  options.dampening = read.number("dampening", options.dampening);
  options.weight_decay = read.number("weight_decay", options.weight_decay);
  options.nesterov = read.flag("nesterov", options.nesterov);
  return std::make_unique<Sgd>(std::move(groups), options);
}

std::unique_ptr<Optimizer> make_lamb(const ParamReader& read, std::vector<ParamGroup> groups) {
  read.reject_amsgrad("DeepSpeed's FusedLamb");
  LambOptions options;
  options.lr = read.number("lr", options.lr);
  options.bias_correction = read.flag("bias_correction", options.bias_correction);
  options.betas = read.betas(options.betas);
  options.eps = read.number("eps", options.eps);
  options.eps_inside_sqrt = read.flag("eps_inside_sqrt", options.eps_inside_sqrt);
  options.weight_decay = read.number("weight_decay", options.weight_decay);
  options.max_coeff = read.number("max_coeff", options.max_coeff);
  options.min_coeff = read.number("min_coeff", options.min_coeff);
  return std::make_unique<Lamb>(std::move(groups), options);
}

std::unique_ptr<Optimizer> make_lion(const ParamReader& read, std::vector<ParamGroup> groups) {
  LionOptions options;
  options.lr = read.number("lr", options.lr);
  options.betas = read.betas(options.betas);
  options.weight_decay = read.number("weight_decay", options.weight_decay);
  return std::make_unique<Lion>(std::move(groups), options);
}

}  // namespace

const char* OptimizerValue::kind() const {
  if (std::holds_alternative<double>(value_)) return "a number";
  if (std::holds_alternative<bool>(value_)) return "a bool";
  if (std::holds_alternative<std::string>(value_)) return "a string";
  return "a list of numbers";
}

std::string OptimizerValue::str() const {
  std::ostringstream out;
  if (const double* number = std::get_if<double>(&value_)) out << *number;
  else if (const bool* flag = std::get_if<bool>(&value_)) out << (*flag ? "true" : "false");
  else if (const std::string* text = std::get_if<std::string>(&value_)) out << '"' << *text << '"';
  else {
    const auto& list = std::get<std::vector<double>>(value_);
    out << "[";
    for (size_t i = 0; i < list.size(); ++i) out << (i ? ", " : "") << list[i];
    out << "]";
  }
  return out.str();
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& type, const OptimizerParams& params,
                                          std::vector<autograd::Variable> parameters) {
  return make_optimizer(type, params, single_group(std::move(parameters)));
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& type, const OptimizerParams& params,
                                          const std::vector<std::pair<std::string, autograd::Variable>>& named) {
  return make_optimizer(type, params, single_group(named));
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& type, const OptimizerParams& params,
                                          std::vector<ParamGroup> groups) {
  const std::vector<std::string> known = {"Adam", "AdamW", "SGD", "Lamb", "Lion"};
  const std::string key = lower_case(type);
  if (key == "adam" || key == "adamw") {
    const std::string name = key == "adam" ? "Adam" : "AdamW";
    const ParamReader read(name, params,
                           {"lr", "betas", "eps", "weight_decay", "bias_correction", "adam_w_mode", "torch_adam",
                            "amsgrad"});
    return make_adam(name, read, std::move(groups));
  }
  if (key == "sgd") {
    return make_sgd(ParamReader("SGD", params, {"lr", "momentum", "dampening", "weight_decay", "nesterov"}),
                    std::move(groups));
  }
  if (key == "lamb") {
    return make_lamb(ParamReader("Lamb", params,
                                 {"lr", "bias_correction", "betas", "eps", "eps_inside_sqrt", "weight_decay",
                                  "max_coeff", "min_coeff", "amsgrad"}),
                     std::move(groups));
  }
  if (key == "lion") return make_lion(ParamReader("Lion", params, {"lr", "betas", "weight_decay"}), std::move(groups));
  FATHOM_FAIL("unknown optimizer type \"", type, "\"", did_you_mean_suffix(type, known), " Known types: ", joined_names(known),
              " (case-insensitive, as in DeepSpeed)");
}

}  // namespace fathom::nn
