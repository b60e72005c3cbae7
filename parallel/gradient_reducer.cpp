#include "parallel/gradient_reducer.h"

#include "core/error.h"
#include "core/memory_stats.h"

namespace fathom::parallel {

namespace {
std::vector<int64_t> sizes_of(const std::vector<ReducedParameter>& parameters) {
  std::vector<int64_t> sizes;
  for (const ReducedParameter& p : parameters) sizes.push_back(p.holder.numel());
  return sizes;
}
// A bucket holds one dtype: a new one starts where the dtype changes.
std::vector<int> dtypes_of(const std::vector<ReducedParameter>& parameters) {
  std::vector<int> kinds;
  for (const ReducedParameter& p : parameters) {
    FATHOM_CHECK(is_floating_point(p.holder.dtype()), "gradient reducer: parameter \"", p.name, "\" is ",
                 dtype_name(p.holder.dtype()));
    kinds.push_back(static_cast<int>(p.holder.dtype()));
  }
  return kinds;
}
}  // namespace

GradientReducer::GradientReducer(std::shared_ptr<Communicator> group, std::vector<ReducedParameter> parameters,
                                 GradientReducerOptions options)
    : group_(std::move(group)),
      parameters_(std::move(parameters)),
      options_(options),
      plan_(sizes_of(parameters_), options.bucket_elements, dtypes_of(parameters_)) {
  FATHOM_CHECK(group_ != nullptr, "gradient reducer: no communicator");
  buckets_.resize(plan_.size());
  for (size_t b = 0; b < plan_.size(); ++b) {
    const ReducedParameter& first = parameters_[plan_.members(b).front()];
    const DType dtype = options_.averaging.dtype_for(first.holder.dtype());
    // Buckets of the gradients' dtype are their storage (attach_gradient_views), hence the tag.
    MemoryTagScope tag(dtype == first.holder.dtype() ? MemoryTag::Gradients : MemoryTag::Communication);
    buckets_[b].flat = Tensor::zeros({plan_.elements(b)}, dtype, first.holder.device());
  }
}

void GradientReducer::record(Event::Kind kind, int bucket) {
  const std::chrono::duration<double> since = std::chrono::steady_clock::now() - backward_start_;
  events_.push_back({kind, bucket, since.count()});
}

Tensor GradientReducer::slot_of(size_t k) const {
  return buckets_[plan_.bucket_of(k)].flat.narrow(0, plan_.offset_in_bucket(k), parameters_[k].holder.numel());
}

void GradientReducer::attach_gradient_views() {
  for (size_t k = 0; k < parameters_.size(); ++k) {
    const ReducedParameter& p = parameters_[k];
    if (p.holder.grad().defined()) continue;  // accumulating already (a view, or someone else's tensor)
    Tensor view = slot_of(k);
    if (view.dtype() != p.holder.dtype()) continue;  // a communication buffer of another dtype
    view.zero_();
    p.holder.set_grad(view.view(p.holder.sizes()));
  }
}

bool GradientReducer::is_view(size_t k) const {
  const Tensor& grad = parameters_[k].holder.grad();
  return grad.defined() && grad.shares_storage(buckets_[plan_.bucket_of(k)].flat);
}

void GradientReducer::prepare_backward(bool reduce) {
  attach_gradient_views();
  reducing_ = reduce;
  if (!reduce) return;
  FATHOM_CHECK(plan_.launched() == 0, "gradient reducer: the previous reducing backward was not finished; call "
               "finish_backward() (engine.backward does) after each backward");
  backward_start_ = std::chrono::steady_clock::now();
  events_.clear();
  plan_.reset();
}

void GradientReducer::copy_in(size_t k) {
  if (plan_.is_ready(k)) return;
  const ReducedParameter& p = parameters_[k];
  if (!is_view(k)) {  // a gradient that is not the bucket's own view is copied in
    Tensor slot = slot_of(k);
    if (const Tensor& grad = p.holder.grad(); grad.defined()) slot.copy_(grad.reshape({p.holder.numel()}));
    else slot.zero_();
  }
  plan_.mark_ready(k);
}

void GradientReducer::gradient_ready(size_t k) {
  if (!reducing_ || !options_.overlap) return;
  copy_in(k);
  launch_ready_buckets();
}

void GradientReducer::launch(size_t b) {
  scale_in_place(buckets_[b].flat, options_.averaging.before(group_->size()));
  buckets_[b].work = group_->all_reduce_async(buckets_[b].flat, options_.averaging.op());
  record(Event::BucketIssued, static_cast<int>(b));
}

void GradientReducer::launch_ready_buckets() {
  while (const std::optional<size_t> bucket = plan_.next_launchable()) launch(*bucket);
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
    scale_in_place(buckets_[b].flat, options_.averaging.after(group_->size()));
    for (const size_t k : plan_.members(b)) {
      if (is_view(k)) continue;  // averaged in place
      const ReducedParameter& p = parameters_[k];
      Tensor averaged = slot_of(k).reshape(p.holder.sizes());
      if (const Tensor& grad = p.holder.grad(); grad.defined()) grad.copy_(averaged);
      else {
        MemoryTagScope tag(MemoryTag::Gradients);
        p.holder.set_grad(averaged.dtype() == p.holder.dtype() ? averaged.clone() : averaged.to(p.holder.dtype()));
      }
    }
  }
  record(Event::BucketsDone, -1);
  last_communication_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  plan_.reset();
  reducing_ = false;
}

}  // namespace fathom::parallel
