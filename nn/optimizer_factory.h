#pragma once
// make_optimizer: an optimizer from a DeepSpeed-style "optimizer" config section,
//   {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "weight_decay": 0.1}}
// with DeepSpeed's type names (case-insensitive), parameter names, defaults and semantics
// (deepspeed/runtime/engine.py, _configure_basic_optimizer). The engine's config parser turns
// JSON numbers, booleans and number lists into OptimizerValues.

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "nn/optimizer.h"

namespace fathom::nn {

// One config value: a number, a bool, a list of numbers (betas) or a string (1-bit Adam's
// comm_backend_name).
class OptimizerValue {
 public:
  OptimizerValue(double value) : value_(value) {}
  OptimizerValue(int value) : value_(static_cast<double>(value)) {}
  OptimizerValue(bool value) : value_(value) {}
  OptimizerValue(std::vector<double> values) : value_(std::move(values)) {}
  OptimizerValue(std::initializer_list<double> values) : value_(std::vector<double>(values)) {}
  explicit OptimizerValue(std::string text) : value_(std::move(text)) {}
  OptimizerValue(const char*) = delete;  // would silently become a bool

  const std::variant<double, bool, std::vector<double>, std::string>& value() const { return value_; }
  const char* kind() const;  // "a number", "a bool", "a list of numbers", "a string"
  std::string str() const;   // "0.001", "true", "[0.9, 0.999]", "\"mpi\""

 private:
  std::variant<double, bool, std::vector<double>, std::string> value_;
};

using OptimizerParams = std::map<std::string, OptimizerValue>;

// type: "Adam", "AdamW", "SGD", "Lamb" or "Lion" (any case). Unknown types, unknown parameters
// (with a did-you-mean), values of the wrong kind and values out of range are errors naming the
// parameter and what is allowed.
std::unique_ptr<Optimizer> make_optimizer(const std::string& type, const OptimizerParams& params,
                                          std::vector<autograd::Variable> parameters);
// The same, keyed by dotted names (Module::named_parameters()).
std::unique_ptr<Optimizer> make_optimizer(const std::string& type, const OptimizerParams& params,
                                          const std::vector<std::pair<std::string, autograd::Variable>>& named);
// The same, with parameter groups (per-group lr / weight_decay override the params).
std::unique_ptr<Optimizer> make_optimizer(const std::string& type, const OptimizerParams& params,
                                          std::vector<ParamGroup> groups);

}  // namespace fathom::nn
