#pragma once
// ZeRO stage 3's parameter lifecycle: each rank stores only its shard of the flat parameters
// (FlatParameters::Storage::ShardOnly); a parameter is all-gathered into full data just before
// a module that owns it runs forward, released after, gathered again before that module's
// backward (an identity autograd function on the module's outputs whose backward gathers) and
// released once its gradient is final. Gathering is idempotent and state lives per parameter,
// so tied parameters (GPT's embedding and head) and modules called twice work.
//
// Persistent parameters (at most persistence_threshold elements, DeepSpeed's
// stage3_param_persistence_threshold) stay gathered: they are re-gathered after each step.
// Prefetch: the order in which modules first run forward is recorded on the first step; later,
// entering a module starts asynchronous gathers for the parameters of the modules that follow,
// while the elements in flight stay within prefetch_elements (stage3_prefetch_bucket_size) and
// the gathered elements within max_live_elements (stage3_max_live_parameters). After a module's
// forward, a parameter the recorded path uses again within max_reuse_distance gathered elements
// (stage3_max_reuse_distance) stays gathered instead of being released and gathered again.
// With the shard in swap files (offload_param nvme; zero/swapped_parameters.h) the same recorded
// order drives reads ahead: entering a module in forward starts reading the pieces of the modules
// after it, entering one in backward those before it, within prefetch_elements (and
// max_live_elements beside what is gathered) and as far as the store's buffers and memory bound
// allow, so that module k+1's read overlaps module k's compute. All-gathers are then issued as
// modules start: every rank must issue them in the same order, and what each rank has read
// differs.

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/module.h"
#include "parallel/communicator.h"
#include "zero/flat_parameters.h"
#include "zero/parameter_residency.h"
#include "zero/zero_defaults.h"

namespace fathom::zero {

struct GatherOptions {
  int64_t persistence_threshold = kDefaultPersistenceThreshold;  // elements
  int64_t prefetch_elements = kDefaultPrefetchElements;
  int64_t max_live_elements = kDefaultMaxLiveElements;
  int64_t max_reuse_distance = kDefaultMaxReuseDistance;  // stage3_max_reuse_distance, elements
};

// The state's ParameterResidency at stage 3 (ShardedState::residency()).
class ParameterGatherer final : public ParameterResidency {
 public:
  ParameterGatherer(const FlatParameters& flat, std::shared_ptr<parallel::Communicator> group,
                    GatherOptions options);

  // Forward pre/post hooks on every module with parameters of its own, removed with the gatherer.
  void install_hooks(nn::Module& model);

  // Backward reached module `module` (an index of the hooked modules): its parameters gathered,
  // the reads of those before it on the recorded path started.
  void on_module_backward(size_t module);
  void release(size_t slot);   // back to empty data (persistent parameters stay)
  // ParameterResidency. release_full_parameters also ends a backward: whatever is still gathered.
  void gather_full_parameters() override;
  void release_full_parameters() override;
  // `part`'s own parameters and its submodules'.
  void gather_parameters_of(const nn::Module& part) override;
  void release_parameters_of(const nn::Module& part) override;
  bool gathers_collectively() const override { return group_->size() > 1; }
  void reload_parameters() override;  // the persistent parameters, from the updated shards

  int64_t gathered_elements() const { return gathered_elements_; }
  int64_t peak_gathered_elements() const { return peak_gathered_elements_; }
  void reset_peak() { peak_gathered_elements_ = gathered_elements_; }
  int64_t gathers_issued() const { return gathers_issued_; }  // all-gathers started so far
  bool is_persistent(size_t slot) const { return persistent_[slot]; }
  // What stage 3 shards, for a start-up line: "14 of 14 parameters partitioned over 2
  // data-parallel ranks (stage3_param_persistence_threshold 0): 41234 of 82468 elements per rank".
  std::string summary() const;

  // What the last completed step's forwards and prefetches did, for tests: (module index, kind).
  struct Event {
    enum Kind { PrefetchIssued, ReadIssued, ModuleForwardStarted, ModuleForwardEnded, ModuleBackwardStarted } kind;
    int module = -1;
  };
  const std::vector<Event>& events() const { return last_step_events_; }

 private:
  struct Pending {
    Tensor full;
    parallel::WorkHandle work;
  };
  void start_gather(size_t slot);   // issues the all-gather (async)
  void finish_gather(size_t slot);  // waits and installs the data
  void prefetch_after(size_t module);
  void read_ahead(size_t position, int direction);  // from order_[position] on, forward (+1) or back (-1)
  void on_module_forward(size_t module, bool start);
  std::vector<size_t> slots_of(const nn::Module& part) const;
  bool reused_soon(size_t slot) const;

  const FlatParameters& flat_;
  std::shared_ptr<parallel::Communicator> group_;
  GatherOptions options_;
  std::vector<bool> gathered_, persistent_;
  std::vector<Pending> pending_;
  std::vector<std::vector<size_t>> module_slots_;  // per hooked module: its own parameters' slots
  std::vector<size_t> order_;                      // module indices in first-step forward order
  size_t cursor_ = 0;                              // where to look for the next module in order_
  size_t position_ = 0;                            // order_ index of the module running (or size)
  size_t backward_position_ = 0;                   // order_ index backward reached last (or size)
  bool recording_ = true;
  // Between gather_full_parameters and release_full_parameters every parameter stays whole: the
  // modules' forwards (a pinned generation's) neither gather, release nor count as the path.
  bool full_ = false;
  int64_t gathered_elements_ = 0, peak_gathered_elements_ = 0;
  int64_t in_flight_elements_ = 0;  // gathers started and not yet installed
  int64_t gathers_issued_ = 0;
  std::vector<Event> events_, last_step_events_;
  std::vector<autograd::HookHandle> hooks_;
  std::unordered_map<const autograd::VariableImpl*, size_t> slot_of_parameter_;
};

}  // namespace fathom::zero
