#pragma once
// Learning-rate schedules with DeepSpeed's names, parameters, defaults and arithmetic
// (deepspeed/runtime/lr_schedules.py, v0.16): WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle.
//
// A schedule holds the learning rate of each optimizer parameter group "in force": what
// DeepSpeed's scheduler has written into optimizer.param_groups[i]["lr"]. That includes the
// value DeepSpeed sets when the scheduler is constructed (before the first step()), and its
// quirks, so a Fathom run and a DeepSpeed run use the same lr at every step. The caller (the
// engine) copies get_lrs() into its optimizer after each step(). One parameter group is the
// common case: get_lr() is group 0's lr.
//
// The reference values in tests/data/lr_schedules_reference.json come from DeepSpeed's own file
// (see tests/data/generate_lr_schedules.py); docs/nn_io.md lists every formula.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace fathom::nn {

// One parameter value from a config's "scheduler": {"params": {...}} section.
class LRParamValue {
 public:
  LRParamValue(double value) : value_(value) {}
  LRParamValue(int value) : value_(static_cast<int64_t>(value)) {}
  LRParamValue(int64_t value) : value_(value) {}
  LRParamValue(bool value) : value_(value) {}
  LRParamValue(std::string value) : value_(std::move(value)) {}
  LRParamValue(const char* value) : value_(std::string(value)) {}

  const std::variant<bool, int64_t, double, std::string>& value() const { return value_; }
  const char* kind() const;  // "a number", "an integer", "a bool", "a string"
  std::string str() const;

 private:
  std::variant<bool, int64_t, double, std::string> value_;
};

using LRParamMap = std::map<std::string, LRParamValue>;

// What a checkpoint must keep to resume a schedule (DeepSpeed's state_dict() holds exactly this).
struct LRSchedulerState {
  int64_t last_batch_iteration = -1;
};

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual const char* type() const = 0;  // DeepSpeed's name: "WarmupLR", ...

  // DeepSpeed's step(): call once after each optimizer step. Advances last_batch_iteration by
  // one (or sets it) and updates the lrs in force.
  void step();
  void step(int64_t batch_iteration);

  double get_lr() const { return lrs_.front(); }               // parameter group 0
  const std::vector<double>& get_lrs() const { return lrs_; }  // every parameter group
  size_t num_groups() const { return lrs_.size(); }
  int64_t last_batch_iteration() const { return last_batch_iteration_; }

  LRSchedulerState state_dict() const { return {last_batch_iteration_}; }
  // Restores the iteration and recomputes the lrs in force at it (what the optimizer's own
  // restored state holds in DeepSpeed).
  void load_state_dict(const LRSchedulerState& state);

 protected:
  // `base_lrs`: each group's lr before the schedule touches it (the optimizer's configured lr).
  LRScheduler(std::vector<double> base_lrs, int64_t last_batch_iteration);
  // What DeepSpeed's get_lr() returns at last_batch_iteration(). It may hold fewer values than
  // there are groups (WarmupCosineLR before its first step returns [0.0]); like DeepSpeed's
  // update_lr (a zip), only that many groups are updated.
  virtual std::vector<double> compute_lrs() const = 0;
  // Extra state a step updates besides the lrs (OneCycle's momentum).
  virtual void after_update() {}
  // Sets the lrs in force from compute_lrs(); constructors call it when DeepSpeed's would.
  void update_lrs();
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 private:
  std::vector<double> base_lrs_;
  std::vector<double> lrs_;
  int64_t last_batch_iteration_;
};

// The schedule types make_lr_scheduler knows, in DeepSpeed's spelling.
const std::vector<std::string>& lr_scheduler_types();

// A schedule from a DeepSpeed config's "scheduler" section: {"type": type, "params": params}.
// `base_lr` is the optimizer's lr (WarmupCosineLR scales it; the others overwrite it).
// Unknown types, unknown parameters (with a did-you-mean), values of the wrong kind and values
// out of range are errors naming the parameter and what is allowed.
std::unique_ptr<LRScheduler> make_lr_scheduler(const std::string& type, const LRParamMap& params, double base_lr);
// The same for several parameter groups, each with its own base lr.
std::unique_ptr<LRScheduler> make_lr_scheduler(const std::string& type, const LRParamMap& params,
                                               std::vector<double> base_lrs);

}  // namespace fathom::nn
