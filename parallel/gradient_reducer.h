#pragma once
// Data parallelism's gradient averaging, overlapped with backward.
//
// Parameters are packed, in reverse order (the order backward produces their gradients), into
// buckets of about `bucket_elements` (zero_optimization.reduce_bucket_size;
// parallel/gradient_buckets.h, shared with ZeRO). As each
// parameter's gradient becomes final in a backward that ends an accumulation cycle (the owner's
// grad-ready hook calls gradient_ready), it is copied into its bucket; a full bucket's all-reduce (avg) starts at
// once on the communicator's progress thread while backward goes on computing. Buckets start
// strictly in index order, so every rank issues the same collectives in the same order even if
// gradients become ready in a different order. finish_backward() waits for the buckets and
// writes the averaged gradients back. Backwards that do not end a cycle communicate nothing.
// With overlap off, everything is reduced in finish_backward(), as DeepSpeed does at stage 0;
// the buckets launched there go as one CollectiveGroup (a single NCCL launch).
//
// The buckets are the gradients' storage: before each backward, every gradient not yet defined
// becomes a view of its bucket slot (PyTorch DDP's gradient_as_bucket_view), so gradients
// accumulate in place and are averaged in place — no copy in, no copy back, no second buffer.
// A gradient someone else set (not a view) is copied in and back instead, and so is every
// gradient when the communication dtype differs from the gradients' (the buckets are then
// communication buffers of that dtype).
//
// A parameter that got no gradient on this rank contributes zeros and ends with the average
// (a defined gradient), so all ranks keep identical gradients.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "parallel/communicator.h"
#include "parallel/gradient_averaging.h"
#include "parallel/gradient_buckets.h"

namespace fathom::parallel {

struct ReducedParameter {
  std::string name;
  autograd::Variable holder;  // whose grad() is reduced (the fp32 master in mixed precision)
};

struct GradientReducerOptions {
  int64_t bucket_elements = 0;            // zero_optimization.reduce_bucket_size (required)
  bool overlap = true;                    // zero_optimization.overlap_comm
  GradientAveraging averaging;            // prescaling, predivision, communication dtype
};

class GradientReducer {
 public:
  GradientReducer(std::shared_ptr<Communicator> group, std::vector<ReducedParameter> parameters,
                  GradientReducerOptions options);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before each micro-batch's backward: whether this backward ends an accumulation cycle.
  void prepare_backward(bool reduce);
  // During it: parameter `index`'s gradient is final (its owner's grad-ready hook).
  void gradient_ready(size_t index);
  // After it: averaged gradients in every holder (a no-op when not reducing).
  void finish_backward();

  size_t num_buckets() const { return plan_.size(); }
  Communicator& group() const { return *group_; }

  // What the last reducing backward did, for tests and benchmarks.
  struct Event {
    enum Kind { BucketIssued, BackwardEnded, BucketsDone } kind;
    int bucket = -1;
    double seconds = 0;  // since prepare_backward
  };
  const std::vector<Event>& events() const { return events_; }
  // Seconds finish_backward spent on communication (waiting for overlapped buckets, or
  // reducing everything when overlap is off).
  double last_communication_seconds() const { return last_communication_seconds_; }

 private:
  struct Bucket {
    Tensor flat;  // the members' gradients, laid out as plan_ says
    WorkHandle work;
  };
  Tensor slot_of(size_t parameter) const;  // the parameter's slice of its bucket (flat)
  bool is_view(size_t parameter) const;    // its gradient is that slice
  void attach_gradient_views();
  void copy_in(size_t parameter);
  void launch_ready_buckets();
  void launch(size_t bucket);
  void record(Event::Kind kind, int bucket);

  std::shared_ptr<Communicator> group_;
  std::vector<ReducedParameter> parameters_;
  GradientReducerOptions options_;
  GradientBuckets plan_;
  std::vector<Bucket> buckets_;
  bool reducing_ = false;
  std::chrono::steady_clock::time_point backward_start_;
  std::vector<Event> events_;
  double last_communication_seconds_ = 0;
};

}  // namespace fathom::parallel
