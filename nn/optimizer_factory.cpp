#include "nn/optimizer_factory.h"

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

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// `; did you mean "x"?` for the closest candidate (ignoring case) when it is close enough, else ".".
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  std::vector<std::string> lowered;
  for (const std::string& candidate : candidates) lowered.push_back(lower(candidate));
  const std::string match = closest_match(lower(word), lowered);
  for (size_t i = 0; i < lowered.size(); ++i)
    if (!match.empty() && lowered[i] == match) return "; did you mean \"" + candidates[i] + "\"?";
  return ".";
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// Reads typed values out of the params after rejecting unknown names.
class ParamReader {
 public:
  ParamReader(std::string type, const OptimizerParams& params, std::vector<std::string> known)
      : type_(std::move(type)), params_(params) {
    FATHOM_CHECK(!params.count("max_grad_norm"), type_,
                 ": \"max_grad_norm\" is not an optimizer parameter; use the top-level \"gradient_clipping\" "
                 "config key (DeepSpeed rejects it the same way)");
    for (const auto& [name, value] : params) {
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      FATHOM_FAIL(type_, ": unknown optimizer parameter \"", name, "\"", suggestion(name, known), " ", type_,
                  " takes: ", joined(known));
    }
  }

  double number(const char* key, double fallback) const {
    const OptimizerValue* value = find(key);
    if (!value) return fallback;
    const double* number = std::get_if<double>(&value->value());
    FATHOM_CHECK(number, type_, ": \"", key, "\" must be a number, got ", value->kind(), " (", value->str(), ")");
    return *number;
  }

  bool flag(const char* key, bool fallback) const {
    const OptimizerValue* value = find(key);
    if (!value) return fallback;
    const bool* flag = std::get_if<bool>(&value->value());
    FATHOM_CHECK(flag, type_, ": \"", key, "\" must be true or false, got ", value->kind(), " (", value->str(), ")");
    return *flag;
  }

  std::array<double, 2> betas(std::array<double, 2> fallback) const {
    const OptimizerValue* value = find("betas");
    if (!value) return fallback;
    const auto* list = std::get_if<std::vector<double>>(&value->value());
    FATHOM_CHECK(list && list->size() == 2, type_, ": \"betas\" must be a list of two numbers [beta1, beta2], got ",
                 value->kind(), " (", value->str(), ")");
    return {(*list)[0], (*list)[1]};
  }

  void reject_amsgrad(const char* implementation) const {
    FATHOM_CHECK(!flag("amsgrad", false), type_, ": \"amsgrad\": true is not supported (", implementation,
                 " does not support the AMSGrad variant either); remove it or set it to false");
  }

 private:
  const OptimizerValue* find(const char* key) const {
    auto it = params_.find(key);
    return it == params_.end() ? nullptr : &it->second;
  }
  std::string type_;
  const OptimizerParams& params_;
};

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
  return "a list of numbers";
}

std::string OptimizerValue::str() const {
  std::ostringstream out;
  if (const double* number = std::get_if<double>(&value_)) out << *number;
  else if (const bool* flag = std::get_if<bool>(&value_)) out << (*flag ? "true" : "false");
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
  const std::string key = lower(type);
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
  FATHOM_FAIL("unknown optimizer type \"", type, "\"", suggestion(type, known), " Known types: ", joined(known),
              " (case-insensitive, as in DeepSpeed)");
}

}  // namespace fathom::nn
