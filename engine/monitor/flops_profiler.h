#pragma once
// The flops profiler (DeepSpeed's "flops_profiler" section): the forward pass of one step
// counted op by op — each registry op's MACs and flops from its shapes (kernels/op_registry.h,
// OpCost), attributed to the module running it — and timed per module; printed with the step's
// backward and optimizer latencies as DeepSpeed's summary, the top modules per depth and the
// annotated module tree (docs/monitoring.md shows one).
//
// As DeepSpeed, the step profiled is the one after `profile_step` steps have completed (the
// default 1 skips a warm-up step), on the first rank, and with gradient accumulation its last
// micro-batch: the latencies printed are that micro-step's, so they match the counted work. On a
// GPU each module's time waits for the device at its start and end (DeepSpeed synchronises too),
// which serialises that one forward pass.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/hook_handle.h"
#include "autograd/op_observer.h"
#include "engine/monitor/step_instrument.h"
#include "engine/monitor/step_timers.h"
#include "nn/module.h"

namespace fathom {

struct FlopsProfilerOptions {
  int64_t profile_step = 1;
  int64_t module_depth = -1;  // the aggregated profile's deepest level; -1: all
  int64_t top_modules = 1;
  bool detailed = true;       // the annotated module tree
  std::string output_file;    // "" = standard output
  double recompute_fwd_factor = 0.0;  // backward's work = (2 + factor) x forward's
};

// The job's shape, for the summary's header.
struct ProfiledJob {
  int world_size = 1, data_parallel_size = 1, model_parallel_size = 1;
  int64_t micro_batch_size = 1;
  // Under a pipeline the profiled module is one stage: the stages and their parameters together
  // (every stage's rank counts its own; attach_profilers sums them).
  int pipeline_stages = 1;
  int64_t params_of_all_stages = 0;
};

// One module of the tree, in depth-first order (the root first).
struct ModuleProfile {
  std::string name;  // the child's name in its parent ("" for the root)
  std::string type;  // type_name()
  int depth = 0;
  std::vector<size_t> children;
  int64_t params = 0;                // its parameters, counted once (shared ones where first reached)
  int64_t own_macs = 0, own_flops = 0;  // of the ops it ran outside its children
  double own_ms = 0;                 // measured around its forward (0: never called itself)
  bool called = false;
};

class FlopsProfiler final : public StepInstrument, private autograd::OpObserver {
 public:
  FlopsProfiler(nn::Module& model, FlopsProfilerOptions options, ProfiledJob job);

  // Counting by hand (the engine drives these at the profiled step): start() installs the
  // module hooks and zeroes the counts, stop() removes the hooks; ops run between them count.
  void start();
  void stop();

  const std::vector<ModuleProfile>& modules() const { return modules_; }
  // Totals of module `m` and its descendants; forward_ms falls back to the children's sum for
  // a module never called itself (a container whose children its parent calls).
  int64_t total_params(size_t m = 0) const;
  int64_t total_macs(size_t m = 0) const;
  int64_t total_flops(size_t m = 0) const;
  double forward_ms(size_t m = 0) const;

  // The whole printout for a step whose last micro-step took `times`.
  std::string report(int64_t step, const PhaseTimes& times) const;

  void before_forward(Engine& engine, int64_t step) override;
  void after_forward(Engine& engine, int64_t step) override;
  void after_optimizer_step(Engine& engine, const StepReport& report) override;

 private:
  void on_op(const OpInfo& op, const TensorList& inputs, const TensorList& outputs, const Attributes& attrs) override;
  void add_module(nn::Module& module, const std::string& name, int depth, std::vector<const void*>& seen);
  int64_t sum_children(size_t m, int64_t (FlopsProfiler::*total)(size_t) const) const;
  std::string aggregated_profile() const;
  void detailed_profile(size_t m, const std::string& indent, std::string& out) const;

  FlopsProfilerOptions options_;
  ProfiledJob job_;
  Device device_;
  std::vector<nn::Module*> module_of_;
  std::vector<ModuleProfile> modules_;
  std::vector<autograd::HookHandle> hooks_;
  struct Frame {
    size_t module;
    double start_ms;
  };
  std::vector<Frame> stack_;
  std::unique_ptr<autograd::OpObserverScope> observing_;
};

// DeepSpeed's number formats: "124.44 M", "43.5 GMACs", "1.2 TFLOPS", "120.3 ms".
std::string format_count(double value, const std::string& unit = "");
std::string format_seconds(double seconds);

}  // namespace fathom
