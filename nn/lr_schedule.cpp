#include "nn/lr_schedule.h"

#include <sstream>

#include "core/error.h"
#include "core/did_you_mean.h"
#include "nn/lr_schedule_params.h"
#include "nn/one_cycle.h"
#include "nn/warmup_cosine_lr.h"
#include "nn/warmup_lr.h"

namespace fathom::nn {

const char* LRParamValue::kind() const {
  switch (value_.index()) {
    case 0: return "a bool";
    case 1: return "an integer";
    case 2: return "a number";
    default: return "a string";
  }
}

std::string LRParamValue::str() const {
  std::ostringstream out;
  if (const auto* b = std::get_if<bool>(&value_)) out << (*b ? "true" : "false");
  else if (const auto* i = std::get_if<int64_t>(&value_)) out << *i;
  else if (const auto* d = std::get_if<double>(&value_)) out << *d;
  else out << '"' << std::get<std::string>(value_) << '"';
  return out.str();
}

LRScheduler::LRScheduler(std::vector<double> base_lrs, int64_t last_batch_iteration)
    : base_lrs_(std::move(base_lrs)), lrs_(base_lrs_), last_batch_iteration_(last_batch_iteration) {
  FATHOM_CHECK(!base_lrs_.empty(), "LR scheduler: needs at least one parameter group (base lr)");
  FATHOM_CHECK(last_batch_iteration >= -1, "LR scheduler: last_batch_iteration must be >= -1 (-1 starts from the "
                                           "beginning), got ", last_batch_iteration);
}

void LRScheduler::step() { step(last_batch_iteration_ + 1); }

void LRScheduler::step(int64_t batch_iteration) {
  last_batch_iteration_ = batch_iteration;
  update_lrs();
}

void LRScheduler::update_lrs() {
  const std::vector<double> lrs = compute_lrs();
  for (size_t i = 0; i < lrs.size() && i < lrs_.size(); ++i) lrs_[i] = lrs[i];
  after_update();
}

void LRScheduler::load_state_dict(const LRSchedulerState& state) {
  FATHOM_CHECK(state.last_batch_iteration >= -1, type(), ": cannot load last_batch_iteration ",
               state.last_batch_iteration, " (must be >= -1)");
  last_batch_iteration_ = state.last_batch_iteration;
  lrs_ = base_lrs_;
  update_lrs();
}

const std::vector<std::string>& lr_scheduler_types() {
  static const std::vector<std::string> types = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle"};
  return types;
}

std::unique_ptr<LRScheduler> make_lr_scheduler(const std::string& type, const LRParamMap& params, double base_lr) {
  return make_lr_scheduler(type, params, std::vector<double>{base_lr});
}

std::unique_ptr<LRScheduler> make_lr_scheduler(const std::string& type, const LRParamMap& params,
                                               std::vector<double> base_lrs) {
  if (type == "WarmupLR") return std::make_unique<WarmupLR>(read_warmup_lr_config(params), std::move(base_lrs));
  if (type == "WarmupDecayLR")
    return std::make_unique<WarmupDecayLR>(read_warmup_decay_lr_config(params), std::move(base_lrs));
  if (type == "WarmupCosineLR")
    return std::make_unique<WarmupCosineLR>(read_warmup_cosine_lr_config(params), std::move(base_lrs));
  if (type == "OneCycle") return std::make_unique<OneCycle>(read_one_cycle_config(params), std::move(base_lrs));
  FATHOM_CHECK(type != "LRRangeTest", "scheduler type \"LRRangeTest\" (DeepSpeed's learning-rate range test) is not "
                                      "supported by Fathom; use WarmupLR, WarmupDecayLR, WarmupCosineLR or OneCycle");
  std::string list;
  for (const std::string& known : lr_scheduler_types()) {
    if (!list.empty()) list += ", ";
    list += known;
  }
  FATHOM_FAIL("unknown scheduler type \"", type, "\"", did_you_mean(type, lr_scheduler_types()), "; known types: ",
              list, " (names are case-sensitive, as in DeepSpeed)");
}

}  // namespace fathom::nn
