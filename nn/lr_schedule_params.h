#pragma once
// Reading a schedule's LRParamMap: typed getters with DeepSpeed's defaults, and one up-front
// check that every given name is a parameter of that schedule (typos become errors with a
// did-you-mean instead of silently running with a default).

#include <optional>
#include <string>
#include <vector>

#include "nn/lr_schedule.h"

namespace fathom::nn {

class LRParamReader {
 public:
  // Throws for any name in `params` that is not in `known`.
  LRParamReader(std::string type, const LRParamMap& params, std::vector<std::string> known);

  double number(const std::string& name, double fallback) const;
  double required_number(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  std::optional<int64_t> optional_integer(const std::string& name) const;
  int64_t required_integer(const std::string& name) const;
  bool boolean(const std::string& name, bool fallback) const;
  std::string string(const std::string& name, const std::string& fallback) const;

 private:
  const LRParamValue* find(const std::string& name) const;
  [[noreturn]] void wrong_kind(const std::string& name, const char* expected, const LRParamValue& value) const;

  std::string type_;
  const LRParamMap& params_;
};

// Range checks shared by the schedules; each throws "<type>: <name> must be ..., got <value>".
void check_at_least(const char* type, const char* name, double value, double minimum);
void check_in_unit_interval(const char* type, const char* name, double value);
void check_warmup_type(const char* type, const std::string& warmup_type);
// DeepSpeed warns, and runs, when a schedule ends before its warm-up does.
void warn_if_total_below_warmup(const char* type, int64_t total_num_steps, int64_t warmup_num_steps);

}  // namespace fathom::nn
