// DeepSpeed's batch-size rule (runtime/config.py, _set_batch_related_parameters and
// _batch_assertion), with messages that print the numbers and the rule instead of an assert.
#include <string>

#include "core/error.h"
#include "engine/config.h"
#include "engine/config_error.h"

namespace fathom {
namespace {

std::string n(int64_t value) { return std::to_string(value); }

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

  if (tbs && micro && gas) {
    if (tbs != micro * gas * dp)
      throw_config_error(where, tbs_text + " != " + micro_text + " * " + gas_text + " * " + dp_text + " = " +
                                    n(micro * gas * dp));
  } else if (tbs && micro) {
    if (tbs % (micro * dp) != 0)
      throw_config_error(where, tbs_text + " is not a multiple of " + micro_text + " * " + dp_text + " = " +
                                    n(micro * dp) + ", so gradient_accumulation_steps = train_batch_size / "
                                    "(train_micro_batch_size_per_gpu * data-parallel world size) is not a whole "
                                    "number; change one of them or give all three");
    gas = tbs / (micro * dp);
  } else if (tbs && gas) {
    if (tbs % (gas * dp) != 0)
      throw_config_error(where, tbs_text + " is not a multiple of " + gas_text + " * " + dp_text + " = " +
                                    n(gas * dp) + ", so train_micro_batch_size_per_gpu = train_batch_size / "
                                    "(gradient_accumulation_steps * data-parallel world size) is not a whole number; "
                                    "change one of them or give all three");
    micro = tbs / (gas * dp);
  } else if (micro && gas) {
    tbs = micro * gas * dp;
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
    tbs = micro * dp;
  } else {
    throw_config_error(where,
                       "train_batch_size or train_micro_batch_size_per_gpu must be given (DeepSpeed's rule: "
                       "train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * "
                       "data-parallel world size)");
  }
  return BatchConfig{tbs, micro, gas, dp};
}

}  // namespace fathom
