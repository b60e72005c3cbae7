#include "parallel/gradient_reducer.h"

#include "core/error.h"
#include "core/memory_stats.h"

namespace fathom::distributed {

GradientReducer::GradientReducer(std::shared_ptr<Communicator> group, std::vector<ReducedParameter> parameters,
                                 GradientReducerOptions options)
    : group_(std::move(group)), parameters_(std::move(parameters)), options_(options) {
  FATHOM_CHECK(group_ != nullptr, "gradient reducer: no communicator");
  FATHOM_CHECK(options_.bucket_elements > 0, "gradient reducer: the bucket size must be > 0 elements, got ",
               options_.bucket_elements, " (zero_optimization.reduce_bucket_size)");
  bucket_of_.resize(parameters_.size());
  copied_.resize(parameters_.size());
  // Reverse order: backward finishes the last layers' gradients first. A bucket closes when
  // the next parameter would overflow it or has another dtype.
  std::vector<int64_t> sizes;
  std::vector<DType> dtypes;
  for (size_t k = parameters_.size(); k-- > 0;) {
    const ReducedParameter& p = parameters_[k];
    FATHOM_CHECK(is_floating_point(p.holder.dtype()), "gradient reducer: parameter \"", p.name, "\" is ",
                 dtype_name(p.holder.dtype()));
    const int64_t n = p.holder.numel();
    if (buckets_.empty() || sizes.back() + n > options_.bucket_elements || dtypes.back() != p.holder.dtype()) {
      buckets_.emplace_back();
      sizes.push_back(0);
      dtypes.push_back(p.holder.dtype());
    }
    buckets_.back().members.push_back(k);
    buckets_.back().offsets.push_back(sizes.back());
    bucket_of_[k] = buckets_.size() - 1;
    sizes.back() += n;
  }
  // The buckets are the gradients' storage (attach_gradient_views), hence their tag.
  MemoryTagScope tag(MemoryTag::Gradients);
  for (size_t b = 0; b < buckets_.size(); ++b)
    buckets_[b].flat = Tensor::zeros({sizes[b]}, dtypes[b], parameters_.front().holder.device());
}

void GradientReducer::record(Event::Kind kind, int bucket) {
  const std::chrono::duration<double> since = std::chrono::steady_clock::now() - backward_start_;
  events_.push_back({kind, bucket, since.count()});
}

Tensor GradientReducer::slot_of(size_t k) const {
  const Bucket& bucket = buckets_[bucket_of_[k]];
  size_t slot = 0;
  while (bucket.members[slot] != k) ++slot;
  return bucket.flat.narrow(0, bucket.offsets[slot], parameters_[k].holder.numel());
}

void GradientReducer::attach_gradient_views() {
  for (size_t k = 0; k < parameters_.size(); ++k) {
    const ReducedParameter& p = parameters_[k];
    if (p.holder.grad().defined()) continue;  // accumulating already (a view, or someone else's tensor)
    Tensor view = slot_of(k);
    view.zero_();
    p.holder.set_grad(view.view(p.holder.sizes()));
  }
}

bool GradientReducer::is_view(size_t k) const {
  const Tensor& grad = parameters_[k].holder.grad();
  return grad.defined() && grad.shares_storage(buckets_[bucket_of_[k]].flat);
}

void GradientReducer::prepare_backward(bool reduce) {
  attach_gradient_views();
  reducing_ = reduce;
  if (!reduce) return;
  FATHOM_CHECK(next_to_launch_ == 0, "gradient reducer: the previous reducing backward was not finished; call "
               "finish_backward() (engine.backward does) after each backward");
  backward_start_ = std::chrono::steady_clock::now();
  events_.clear();
  std::fill(copied_.begin(), copied_.end(), false);
  for (Bucket& bucket : buckets_) bucket.ready = 0;
}

void GradientReducer::copy_in(size_t k) {
  if (copied_[k]) return;
  copied_[k] = true;
  const ReducedParameter& p = parameters_[k];
  if (!is_view(k)) {  // a gradient that is not the bucket's own view is copied in
    Tensor slot = slot_of(k);
    if (const Tensor& grad = p.holder.grad(); grad.defined()) slot.copy_(grad.reshape({p.holder.numel()}));
    else slot.zero_();
  }
  ++buckets_[bucket_of_[k]].ready;
}

void GradientReducer::gradient_ready(size_t k) {
  if (!reducing_ || !options_.overlap) return;
  copy_in(k);
  launch_ready_buckets();
}

void GradientReducer::launch(size_t b) {
  buckets_[b].work = group_->all_reduce_async(buckets_[b].flat, ReduceOp::Avg);
  record(Event::BucketIssued, static_cast<int>(b));
}

void GradientReducer::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() &&
         buckets_[next_to_launch_].ready == buckets_[next_to_launch_].members.size())
    launch(next_to_launch_++);
}

void GradientReducer::finish_backward() {
  if (!reducing_) return;
  record(Event::BackwardEnded, -1);
  const auto start = std::chrono::steady_clock::now();
  // Parameters whose hook did not fire (no gradient this backward, or overlap off) join now.
  for (size_t k = 0; k < parameters_.size(); ++k) copy_in(k);
  {
    // The buckets still to go (all of them when overlap is off) launch as one group.
    CollectiveGroup launch_together(*group_);
    launch_ready_buckets();
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].work->wait();
    buckets_[b].work.reset();
    for (size_t slot = 0; slot < buckets_[b].members.size(); ++slot) {
      if (is_view(buckets_[b].members[slot])) continue;  // averaged in place
      const ReducedParameter& p = parameters_[buckets_[b].members[slot]];
      Tensor averaged = buckets_[b].flat.narrow(0, buckets_[b].offsets[slot], p.holder.numel()).reshape(p.holder.sizes());
      if (const Tensor& grad = p.holder.grad(); grad.defined()) grad.copy_(averaged);
      else {
        MemoryTagScope tag(MemoryTag::Gradients);
        p.holder.set_grad(averaged.clone());
      }
    }
  }
  record(Event::BucketsDone, -1);
  last_communication_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  next_to_launch_ = 0;
  reducing_ = false;
}

}  // namespace fathom::distributed
