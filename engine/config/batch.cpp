// DeepSpeed's batch-size rule (runtime/config.py, _set_batch_related_parameters and
// _batch_assertion), with messages that print the numbers and the rule instead of an assert.
#include <initializer_list>
#include <string>
#include <utility>

#include "core/error.h"
#include "engine/config/config.h"
#include "engine/config/error.h"

namespace fathom {
namespace {

std::string n(int64_t value) { return std::to_string(value); }

// Far above any real global batch (2^31 samples), far below where int64 arithmetic on sample
// positions could overflow: a product of the user's sizes beyond it is an error, never a wrap.
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 31;

// The product of named sizes, or an error naming them when it exceeds kMaxGlobalBatch.
int64_t product(const ConfigLocation& where, std::initializer_list<std::pair<const std::string*, int64_t>> factors) {
  int64_t out = 1;
  bool overflow = false;
  std::string names;
  for (const auto& [name, value] : factors) {
    overflow = overflow || __builtin_mul_overflow(out, value, &out) || out > kMaxGlobalBatch;
    names += (names.empty() ? "" : " * ") + *name;
  }
  if (overflow)
    throw_config_error(where, names + " is more than " + n(kMaxGlobalBatch) + " samples per optimizer step; "
                              "use batch sizes whose product is at most that");
  return out;
}

}  // namespace

BatchConfig resolve_batch(const BatchConfig& given, int64_t dp, const std::string& source) {
  FATHOM_CHECK(dp >= 1, "resolve_batch: the data-parallel world size must be >= 1, got ", dp);
  const ConfigLocation where{source, 0, ""};
  int64_t tbs = given.train_batch_size, micro = given.train_micro_batch_size_per_gpu,
          gas = given.gradient_accumulation_steps;
  const std::string tbs_text = "train_batch_size (" + n(tbs) + ")";
  const std::string micro_text = "train_micro_batch_size_per_gpu (" + n(micro) + ")";
  const std::string gas_text = "gradient_accumulation_steps (" + n(gas) + ")";
  const std::string dp_text = "data-parallel world size (" + n(dp) + ")";
  for (const auto& [text, value] : {std::pair{&tbs_text, tbs}, {&micro_text, micro}, {&gas_text, gas}})
    if (value > kMaxGlobalBatch)
      throw_config_error(where, *text + " is more than " + n(kMaxGlobalBatch) + " samples; use a real batch size");

  if (tbs && micro && gas) {
    const int64_t global = product(where, {{&micro_text, micro}, {&gas_text, gas}, {&dp_text, dp}});
    if (tbs != global)
      throw_config_error(where, tbs_text + " != " + micro_text + " * " + gas_text + " * " + dp_text + " = " +
                                    n(global));
  } else if (tbs && micro) {
    if (tbs % product(where, {{&micro_text, micro}, {&dp_text, dp}}) != 0)
      throw_config_error(where, tbs_text + " is not a multiple of " + micro_text + " * " + dp_text + " = " +
                                    n(micro * dp) + ", so gradient_accumulation_steps = train_batch_size / "
                                    "(train_micro_batch_size_per_gpu * data-parallel world size) is not a whole "
                                    "number; change one of them or give all three");
    gas = tbs / (micro * dp);
  } else if (tbs && gas) {
    if (tbs % product(where, {{&gas_text, gas}, {&dp_text, dp}}) != 0)
      throw_config_error(where, tbs_text + " is not a multiple of " + gas_text + " * " + dp_text + " = " +
                                    n(gas * dp) + ", so train_micro_batch_size_per_gpu = train_batch_size / "
                                    "(gradient_accumulation_steps * data-parallel world size) is not a whole number; "
                                    "change one of them or give all three");
    micro = tbs / (gas * dp);
  } else if (micro && gas) {
    tbs = product(where, {{&micro_text, micro}, {&gas_text, gas}, {&dp_text, dp}});
  } else if (tbs) {
    if (tbs % dp != 0)
      throw_config_error(where, tbs_text + " is not a multiple of " + dp_text + "; with only train_batch_size "
                                    "given, gradient_accumulation_steps = 1 and train_micro_batch_size_per_gpu = "
                                    "train_batch_size / data-parallel world size must be a whole number; change "
                                    "train_batch_size or give train_micro_batch_size_per_gpu");
    gas = 1;
    micro = tbs / dp;
  } else if (micro) {
    gas = 1;
    tbs = product(where, {{&micro_text, micro}, {&dp_text, dp}});
  } else {
    throw_config_error(where,
                       "train_batch_size or train_micro_batch_size_per_gpu must be given (DeepSpeed's rule: "
                       "train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * "
                       "data-parallel world size)");
  }
  return BatchConfig{tbs, micro, gas, dp};
}

}  // namespace fathom
