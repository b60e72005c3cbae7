#include "nn/lr_schedule_params.h"

#include <cmath>

#include "core/error.h"
#include "core/did_you_mean.h"
#include "core/logging.h"

namespace fathom::nn {

LRParamReader::LRParamReader(std::string type, const LRParamMap& params, std::vector<std::string> known)
    : type_(std::move(type)), params_(params) {
  for (const auto& [name, value] : params) {
    bool found = false;
    for (const std::string& candidate : known) found = found || candidate == name;
    if (found) continue;
    std::string list;
    for (const std::string& candidate : known) {
      if (!list.empty()) list += ", ";
      list += candidate;
    }
    FATHOM_FAIL(type_, ": unknown parameter \"", name, "\"", did_you_mean(name, known), "; ", type_, " takes ", list);
  }
}

const LRParamValue* LRParamReader::find(const std::string& name) const {
  const auto it = params_.find(name);
  return it == params_.end() ? nullptr : &it->second;
}

void LRParamReader::wrong_kind(const std::string& name, const char* expected, const LRParamValue& value) const {
  FATHOM_FAIL(type_, ": ", name, " must be ", expected, ", got ", value.kind(), " (", value.str(), ")");
}

double LRParamReader::number(const std::string& name, double fallback) const {
  const LRParamValue* value = find(name);
  if (value == nullptr) return fallback;
  if (const auto* d = std::get_if<double>(&value->value())) return *d;
  if (const auto* i = std::get_if<int64_t>(&value->value())) return static_cast<double>(*i);
  wrong_kind(name, "a number", *value);
}

double LRParamReader::required_number(const std::string& name) const {
  FATHOM_CHECK(find(name) != nullptr, type_, ": parameter ", name, " is required (DeepSpeed has no default for it)");
  return number(name, 0.0);
}

std::optional<int64_t> LRParamReader::optional_integer(const std::string& name) const {
  const LRParamValue* value = find(name);
  if (value == nullptr) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(&value->value())) return *i;
  // A config written by a JSON library may spell 1000 as 1000.0.
  if (const auto* d = std::get_if<double>(&value->value()))
    if (std::isfinite(*d) && *d == std::floor(*d) && std::fabs(*d) < 9.0e15) return static_cast<int64_t>(*d);
  wrong_kind(name, "an integer", *value);
}

int64_t LRParamReader::integer(const std::string& name, int64_t fallback) const {
  return optional_integer(name).value_or(fallback);
}

int64_t LRParamReader::required_integer(const std::string& name) const {
  FATHOM_CHECK(find(name) != nullptr, type_, ": parameter ", name, " is required (DeepSpeed has no default for it)");
  return *optional_integer(name);
}

bool LRParamReader::boolean(const std::string& name, bool fallback) const {
  const LRParamValue* value = find(name);
  if (value == nullptr) return fallback;
  if (const auto* b = std::get_if<bool>(&value->value())) return *b;
  wrong_kind(name, "true or false", *value);
}

std::string LRParamReader::string(const std::string& name, const std::string& fallback) const {
  const LRParamValue* value = find(name);
  if (value == nullptr) return fallback;
  if (const auto* s = std::get_if<std::string>(&value->value())) return *s;
  wrong_kind(name, "a string", *value);
}

void check_at_least(const char* type, const char* name, double value, double minimum) {
  FATHOM_CHECK(value >= minimum, type, ": ", name, " must be >= ", minimum, ", got ", value);
}

void check_in_unit_interval(const char* type, const char* name, double value) {
  FATHOM_CHECK(value >= 0.0 && value <= 1.0, type, ": ", name, " must be in [0, 1], got ", value);
}

void warn_if_total_below_warmup(const char* type, int64_t total_num_steps, int64_t warmup_num_steps) {
  if (total_num_steps < warmup_num_steps)
    FATHOM_LOG(Warning, type, ": total_num_steps ", total_num_steps, " is less than warmup_num_steps ", warmup_num_steps,
               ": the warm-up never completes");
}

void check_warmup_type(const char* type, const std::string& warmup_type) {
  // DeepSpeed's WarmupLR falls back to "log" with a warning and its WarmupCosineLR fails at the
  // first step; an error up front is kinder than either.
  FATHOM_CHECK(warmup_type == "log" || warmup_type == "linear", type, ": warmup_type must be \"log\" or \"linear\", got \"",
               warmup_type, "\"");
}

}  // namespace fathom::nn
