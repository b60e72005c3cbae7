#pragma once
// Reading an optimizer's config params (nn/optimizer_factory.h) with DeepSpeed's names: every
// optimizer factory — nn's and the communication-compressed ones of parallel/ — checks unknown
// names (with a did-you-mean) and value kinds the same way, each message naming the optimizer.

#include <array>
#include <string>
#include <vector>

#include "nn/optimizer_factory.h"

namespace fathom::nn {

class ParamReader {
 public:
  // Throws for a parameter not in `known`, and for DeepSpeed's misplaced "max_grad_norm".
  ParamReader(std::string type, const OptimizerParams& params, std::vector<std::string> known);

  double number(const char* key, double fallback) const;
  bool flag(const char* key, bool fallback) const;
  std::array<double, 2> betas(std::array<double, 2> fallback) const;
  // A string from `allowed` (compared ignoring case; returned as spelled there).
  std::string choice(const char* key, const std::string& fallback, const std::vector<std::string>& allowed) const;
  void reject_amsgrad(const char* implementation) const;
  const std::string& type() const { return type_; }

 private:
  const OptimizerValue* find(const char* key) const;
  std::string type_;
  const OptimizerParams& params_;
};

std::string lower_case(std::string text);
// `; did you mean "x"?` for the closest candidate (ignoring case) when it is close enough, else ".".
std::string did_you_mean_suffix(const std::string& word, const std::vector<std::string>& candidates);
std::string joined_names(const std::vector<std::string>& names);  // "a, b, c"

}  // namespace fathom::nn
