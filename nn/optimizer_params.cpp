#include "nn/optimizer_params.h"

#include <algorithm>
#include <cctype>

#include "core/did_you_mean.h"
#include "core/error.h"

namespace fathom::nn {

std::string lower_case(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string did_you_mean_suffix(const std::string& word, const std::vector<std::string>& candidates) {
  std::vector<std::string> lowered;
  for (const std::string& candidate : candidates) lowered.push_back(lower_case(candidate));
  const std::string match = closest_match(lower_case(word), lowered);
  for (size_t i = 0; i < lowered.size(); ++i)
    if (!match.empty() && lowered[i] == match) return "; did you mean \"" + candidates[i] + "\"?";
  return ".";
}

std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

ParamReader::ParamReader(std::string type, const OptimizerParams& params, std::vector<std::string> known)
    : type_(std::move(type)), params_(params) {
  FATHOM_CHECK(!params.count("max_grad_norm"), type_,
               ": \"max_grad_norm\" is not an optimizer parameter; use the top-level \"gradient_clipping\" "
               "config key (DeepSpeed rejects it the same way)");
  for (const auto& [name, value] : params) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    FATHOM_FAIL(type_, ": unknown optimizer parameter \"", name, "\"", did_you_mean_suffix(name, known), " ", type_,
                " takes: ", joined_names(known));
  }
}

const OptimizerValue* ParamReader::find(const char* key) const {
  auto it = params_.find(key);
  return it == params_.end() ? nullptr : &it->second;
}

double ParamReader::number(const char* key, double fallback) const {
  const OptimizerValue* value = find(key);
  if (!value) return fallback;
  const double* number = std::get_if<double>(&value->value());
  FATHOM_CHECK(number, type_, ": \"", key, "\" must be a number, got ", value->kind(), " (", value->str(), ")");
  return *number;
}

bool ParamReader::flag(const char* key, bool fallback) const {
  const OptimizerValue* value = find(key);
  if (!value) return fallback;
  const bool* flag = std::get_if<bool>(&value->value());
  FATHOM_CHECK(flag, type_, ": \"", key, "\" must be true or false, got ", value->kind(), " (", value->str(), ")");
  return *flag;
}

std::array<double, 2> ParamReader::betas(std::array<double, 2> fallback) const {
  const OptimizerValue* value = find("betas");
  if (!value) return fallback;
  const auto* list = std::get_if<std::vector<double>>(&value->value());
  FATHOM_CHECK(list && list->size() == 2, type_, ": \"betas\" must be a list of two numbers [beta1, beta2], got ",
               value->kind(), " (", value->str(), ")");
  return {(*list)[0], (*list)[1]};
}

std::string ParamReader::choice(const char* key, const std::string& fallback, const std::vector<std::string>& allowed) const {
  const OptimizerValue* value = find(key);
  if (!value) return fallback;
  const std::string* text = std::get_if<std::string>(&value->value());
  FATHOM_CHECK(text, type_, ": \"", key, "\" must be one of ", joined_names(allowed), ", got ", value->kind(), " (",
               value->str(), ")");
  for (const std::string& name : allowed)
    if (lower_case(name) == lower_case(*text)) return name;
  FATHOM_FAIL(type_, ": \"", key, "\" must be one of ", joined_names(allowed), ", got \"", *text, "\"");
}

void ParamReader::reject_amsgrad(const char* implementation) const {
  FATHOM_CHECK(!flag("amsgrad", false), type_, ": \"amsgrad\": true is not supported (", implementation,
               " does not support the AMSGrad variant either); remove it or set it to false");
}

}  // namespace fathom::nn
