#include "zero/sharded_state.h"

#include <atomic>
#include <cmath>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/reduction.h"
#include "offload/device_transfers.h"
#include "offload/host_memory.h"
#include "zero/swapped_gradients.h"

namespace fathom::zero {

using parallel::ReduceOp;
using parallel::scale_in_place;

namespace {
FlatParameters::Storage storage_for(int stage) {
  return stage == 3 ? FlatParameters::Storage::ShardOnly : FlatParameters::Storage::Full;
}
}  // namespace

ShardedState::ShardedState(const NamedParameters& params, ParallelLayout layout, ShardedOptions options,
                           const OptimizerFactory& make_optimizer, nn::Module* model)
    : TrainingState(std::move(layout), false),
      flat_(params, layout_.groups.data().size(), layout_.groups.data().rank(), storage_for(options.stage),
            options.parameter_offload),
      group_(layout_.groups.for_device(parallel::Axis::Data, flat_.device())),
      options_(options) {
  FATHOM_CHECK(options_.stage >= 1 && options_.stage <= 3, "ZeRO: stage must be 1, 2 or 3, got ", options_.stage);
  FATHOM_CHECK(options_.stage < 3 || model != nullptr, "ZeRO: stage 3 needs the model (to gather each "
               "module's parameters around its forward and backward)");
  FATHOM_CHECK(layout_.placements.size() == params.size(), "training state: ", layout_.placements.size(),
               " placements for ", params.size(), " parameters");
  const int tensor_rank = layout_.groups.tensor().rank();
  for (const nn::Placement& placement : layout_.placements)
    every_slot_counted_ = every_slot_counted_ && placement.counted_at(tensor_rank);
  FATHOM_CHECK(options_.reduce_bucket_elements > 0 && options_.allgather_bucket_elements > 0,
               "ZeRO: reduce_bucket_size and allgather_bucket_size must be > 0");
  keeps_masters_ = flat_.dtype() != DType::F32;
  gradient_dtype_ = keeps_masters_ && options_.accumulate_in_fp32 ? DType::F32 : flat_.dtype();
  owned_ = flat_.partition().owned(group_->rank());

  if (options_.stage == 3) {  // first: it checks that each module fits where the shard lives
    gatherer_ = std::make_unique<ParameterGatherer>(flat_, group_, options_.gather);
    gatherer_->install_hooks(*model);
  }
  shard_ = std::make_unique<OptimizerShard>(flat_.shard(), owned_, keeps_masters_, options_.offload, make_optimizer);
  optimizer_ = shard_->optimizer();
  gradient_ = make_gradient_shard();

  if (options_.stage == 1) {
    flat_gradients_ = flat_.empty_like(gradient_dtype_, MemoryTag::Gradients);
    if (gradient_dtype_ == flat_.dtype()) {
      flat_.attach_gradients(flat_gradients_);  // autograd accumulates straight into the flat buffer
    } else {
      for (size_t s = 0; s < flat_.slots().size(); ++s)
        hooks_.push_back(flat_.slots()[s].param.add_grad_ready_hook(
            [this, s](const autograd::Variable&) { fold_into_flat_gradients(s); }));
    }
  } else {
    build_buckets();
    for (size_t s = 0; s < flat_.slots().size(); ++s)
      hooks_.push_back(flat_.slots()[s].param.add_grad_ready_hook(
          [this, s](const autograd::Variable&) { on_gradient_ready(s); }));
  }
}

// Stages 2-3: slots in reverse (the order backward finishes them), cut into buckets of at most
// reduce_bucket_elements; consecutive slots, so each bucket is a contiguous range of the buffer.
void ShardedState::build_buckets() {
  std::vector<int64_t> sizes;
  for (const auto& slot : flat_.slots()) sizes.push_back(slot.numel);
  plan_.emplace(sizes, options_.reduce_bucket_elements);
  for (size_t b = 0; b < plan_->size(); ++b) {
    const FlatParameters::Slot& last = flat_.slots()[plan_->members(b).front()];
    const FlatParameters::Slot& first = flat_.slots()[plan_->members(b).back()];
    buckets_.push_back({.range = {first.offset, last.offset + last.numel}});
  }
}

void ShardedState::begin_backward(bool boundary) {
  boundary_ = boundary;
  in_backward_ = true;
  if (options_.stage < 2) return;
  gradient_->begin_backward(boundary);
  plan_->reset();
  next_complete_ = 0;
}

void ShardedState::fold_into_flat_gradients(size_t s) {
  const FlatParameters::Slot& slot = flat_.slots()[s];
  const Tensor& grad = slot.param.grad();
  if (!grad.defined()) return;
  Tensor target = flat_gradients_.narrow(0, slot.offset, slot.numel);
  add_(target, grad.reshape({slot.numel}).to(DType::F32));
  slot.param.zero_grad();  // folded in: the 16-bit gradient is released
}

void ShardedState::on_gradient_ready(size_t s) {
  if (!in_backward_ || plan_->is_ready(s)) return;
  const FlatParameters::Slot& slot = flat_.slots()[s];
  Bucket& bucket = buckets_[plan_->bucket_of(s)];
  if (!bucket.flat.defined()) {
    MemoryTagScope tag(MemoryTag::Communication);
    bucket.flat = Tensor::zeros({bucket.range.size()}, communication_dtype(), flat_.device());
  }
  Tensor destination = bucket.flat.narrow(0, slot.offset - bucket.range.begin, slot.numel);
  if (const Tensor& grad = slot.param.grad(); grad.defined()) destination.copy_(grad.reshape({slot.numel}));
  slot.param.zero_grad();  // copied into the bucket: the full gradient is released
  if (gatherer_) gatherer_->release(s);  // stage 3: its data is not needed again in this backward
  plan_->mark_ready(s);
  launch_ready_buckets();
}

void ShardedState::launch_ready_buckets() {
  while (const std::optional<size_t> next = plan_->next_launchable()) {
    // At most two buckets exist at once: the one in flight and the one being filled.
    if (*next > next_complete_) complete(next_complete_);
    Bucket& bucket = buckets_[*next];
    const std::vector<int64_t> counts = flat_.partition().counts_within(bucket.range);
    {
      MemoryTagScope tag(MemoryTag::Communication);
      bucket.received = Tensor::empty({counts[group_->rank()]}, communication_dtype(), flat_.device());
    }
    scale_in_place(bucket.flat, options_.averaging.before(group_->size()));
    bucket.work = group_->reduce_scatter_v_async(bucket.flat, bucket.received, counts, options_.averaging.op());
    if (!options_.overlap_comm) complete(next_complete_);
  }
}

// Waits for bucket `b`'s reduce-scatter and adds this rank's part into the gradient shard.
void ShardedState::complete(size_t b) {
  FATHOM_CHECK(b == next_complete_, "ZeRO: buckets complete in order");
  Bucket& bucket = buckets_[b];
  bucket.work->wait();
  scale_in_place(bucket.received, options_.averaging.after(group_->size()));
  const int64_t begin = std::max(bucket.range.begin, owned_.begin);
  if (bucket.received.numel() > 0) {
    const int64_t offset = begin - owned_.begin;
    if (offload::DeviceTransfers* transfers = shard_->transfers()) {
      // Offloaded from a GPU: copied to the host on the side stream now, added at end_backward.
      Tensor staging;
      {
        MemoryTagScope tag(MemoryTag::Communication);
        offload::HostTierScope host(options_.offload.pin_memory);
        staging = Tensor::empty({bucket.received.numel()}, bucket.received.dtype());
      }
      transfers->to_host(staging, bucket.received);
      arriving_.push_back({std::move(staging), offset});
    } else {
      gradient_->add(bucket.received, offset);
    }
  }
  bucket = Bucket{.range = bucket.range};  // frees the buffers
  ++next_complete_;
}

void ShardedState::land_arriving_gradients() {
  if (arriving_.empty()) return;
  shard_->transfers()->finish();
  for (const Arriving& a : arriving_) gradient_->add(a.host, a.offset);
  arriving_.clear();
}

void ShardedState::end_backward() {
  in_backward_ = false;
  if (options_.stage >= 2) {
    // Parameters that got no gradient this backward contribute zeros.
    for (size_t s = 0; s < flat_.slots().size(); ++s) {
      if (plan_->is_ready(s)) continue;
      in_backward_ = true;
      on_gradient_ready(s);
      in_backward_ = false;
    }
    while (next_complete_ < buckets_.size()) complete(next_complete_);
    land_arriving_gradients();
    if (gatherer_) gatherer_->release_full_parameters();  // parameters without gradients, prefetches unused
  } else if (boundary_) {
    reduce_scatter_flat_gradients();
  }
  gradient_->end_backward(boundary_);
}

// Stage 1, once per cycle: the accumulated full gradients reduce-scattered into this rank's
// shard, in pieces of reduce_bucket_size elements (all ranks' slices of one piece together).
void ShardedState::reduce_scatter_flat_gradients() {
  const Partition& partition = flat_.partition();
  const int64_t shard = partition.shard_size();
  const int world = group_->size();
  const int64_t piece = std::max<int64_t>(1, std::min(shard, options_.reduce_bucket_elements / world));
  const DType dtype = options_.averaging.dtype_for(gradient_dtype_);
  Tensor reduced;
  {
    MemoryTagScope tag(MemoryTag::Gradients);
    reduced = Tensor::empty({shard}, dtype, flat_.device());
  }
  for (int64_t start = 0; start < shard; start += piece) {
    const int64_t n = std::min(piece, shard - start);
    Tensor input = flat_gradients_;  // whole shards in the gradients' dtype: the flat buffer itself
    if (n != shard || dtype != gradient_dtype_) {
      MemoryTagScope tag(MemoryTag::Communication);
      input = Tensor::empty({n * world}, dtype, flat_.device());
      for (int r = 0; r < world; ++r)
        input.narrow(0, r * n, n).copy_(flat_gradients_.narrow(0, partition.shard(r).begin + start, n));
    }
    scale_in_place(input, options_.averaging.before(world));
    group_->reduce_scatter(input, reduced.narrow(0, start, n), options_.averaging.op());
  }
  scale_in_place(reduced, options_.averaging.after(world));
  if (dtype != gradient_dtype_) {
    MemoryTagScope tag(MemoryTag::Gradients);
    reduced = reduced.to(gradient_dtype_);
  }
  gradient_->assign(reduced.narrow(0, 0, owned_.size()));
}

// Where the gradient lives follows the optimizer: swapped by sub-group with offload nvme (one
// directory per shard, as the optimizer's), else one tensor on the device or in the host tier.
std::unique_ptr<GradientShard> ShardedState::make_gradient_shard() const {
  const OptimizerOffload& offload = options_.offload;
  if (offload.tier == OptimizerOffload::Tier::Nvme) {
    static std::atomic<int> shards{0};
    return std::make_unique<SwappedGradients>(
        shard_->sub_group_ranges(), gradient_dtype_, counted_ranges(),
        SwappedGradients::Options{.directory = offload.swap_directory + "/gradient" + std::to_string(shards.fetch_add(1)),
                                  .aio = offload.aio,
                                  .backend = offload.backend,
                                  .pin_memory = offload.pin_memory});
  }
  const GradientPlacement placement{shard_->offloaded() ? kCPU : flat_.device(), shard_->offloaded(), offload.pin_memory};
  return std::make_unique<ResidentGradient>(owned_.size(), gradient_dtype_, options_.stage >= 2, placement,
                                            counted_ranges());
}

// The whole shard, or (tensor parallelism, pipeline ties) the parts of parameters this rank counts.
std::vector<Range> ShardedState::counted_ranges() const {
  if (every_slot_counted_) return {{0, owned_.size()}};
  const int tensor_rank = layout_.groups.tensor().rank();
  std::vector<Range> counted;
  for (size_t s = 0; s < flat_.slots().size(); ++s) {
    const Range slot = flat_.slots()[s].range();
    const Range part{std::max(slot.begin, owned_.begin) - owned_.begin, std::min(slot.end, owned_.end) - owned_.begin};
    if (part.size() <= 0 || !layout_.placements[s].counted_at(tensor_rank)) continue;
    if (!counted.empty() && counted.back().end == part.begin) counted.back().end = part.end;
    else counted.push_back(part);
  }
  return counted;
}

bool ShardedState::local_overflow() const { return gradient_->has_inf_or_nan(); }

double ShardedState::local_norm() const { return gradient_->norm(); }

// Each copy's gradient is spread over its own stage's shards, laid out differently on each
// stage: gathered whole over the data group, summed over the tie, and this rank's part kept.
void ShardedState::sum_tied_gradients(parallel::Communicator& tie, const std::vector<size_t>& parameters) {
  FATHOM_CHECK(gradient_->complete(), "ZeRO: sum_tied_gradients before the boundary's reductions");
  const Device device = gradient_->device();
  const Partition& partition = flat_.partition();
  for (const size_t s : parameters) {
    const Range slot = flat_.slots().at(s).range();
    const std::vector<int64_t> counts = partition.counts_within(slot);
    const Range mine{std::max(slot.begin, owned_.begin), std::min(slot.end, owned_.end)};
    const Range local{mine.begin - owned_.begin, mine.end - owned_.begin};
    Tensor part = mine.size() > 0 ? gradient_->read(local).contiguous() : Tensor::empty({0}, DType::F32, device);
    Tensor whole;
    {
      MemoryTagScope tag(MemoryTag::Communication);
      whole = Tensor::empty({slot.size()}, DType::F32, device);
    }
    // The gradient's own device's communicator: with offload it is in host memory.
    layout_.groups.for_device(parallel::Axis::Data, device)->all_gather_v(part, whole, counts);
    tie.all_reduce(whole);
    if (mine.size() > 0) gradient_->write(local, whole.narrow(0, mine.begin - slot.begin, mine.size()));
  }
}

void ShardedState::scale_gradients(double factor) { gradient_->scale(factor); }

void ShardedState::step() {
  shard_->step(*gradient_);  // writes the updated shard into the parameters, rounded once
  autograd::NoGradGuard no_grad;
  if (gatherer_) gatherer_->reload_parameters();  // stage 3: the others are gathered when used
  else all_gather_parameters();
}

// Every rank's updated shard into everyone's parameters: one all-gather of whole shards, or
// pieces of allgather_bucket_size elements (per all-gather, all ranks together).
void ShardedState::all_gather_parameters() {
  const Partition& partition = flat_.partition();
  const int64_t shard = partition.shard_size();
  const int world = group_->size();
  const int64_t piece = std::max<int64_t>(1, std::min(shard, options_.allgather_bucket_elements / world));
  const Tensor& buffer = flat_.buffer();
  MemoryTagScope tag(MemoryTag::Communication);
  for (int64_t start = 0; start < shard; start += piece) {
    const int64_t n = std::min(piece, shard - start);
    const Tensor mine = buffer.narrow(0, partition.shard(group_->rank()).begin + start, n).clone();
    if (n == shard) {
      group_->all_gather(mine, buffer);  // whole shards: straight into the buffer
      continue;
    }
    const Tensor gathered = Tensor::empty({n * world}, buffer.dtype(), buffer.device());
    group_->all_gather(mine, gathered);
    for (int r = 0; r < world; ++r)
      buffer.narrow(0, partition.shard(r).begin + start, n).copy_(gathered.narrow(0, r * n, n));
  }
}

void ShardedState::zero_grad() {
  gradient_->zero();
  if (flat_gradients_.defined()) flat_gradients_.zero_();
}

void ShardedState::set_gradient_reduction(bool on) {
  FATHOM_CHECK(on, "ZeRO stage ", options_.stage, " cannot turn gradient reduction off: it shards gradients by "
               "reducing them; an optimizer that communicates itself (1-bit Adam) needs zero_optimization.stage 0");
}

// Only the parts with swap files count I/O.
const IoCounters* ShardedState::io_counters() const {
  return shard_->io_counters() || gradient_->io_counters() || flat_.shard().io_counters() ? this : nullptr;
}

IoTotals ShardedState::io_totals() const {
  IoTotals totals;
  for (const auto& counters : {shard_->io_counters(), gradient_->io_counters(), flat_.shard().io_counters()}) {
    if (!counters) continue;
    totals.bytes_read += counters->bytes_read;
    totals.bytes_written += counters->bytes_written;
    totals.wait_seconds += counters->wait_seconds;
  }
  return totals;
}

std::vector<FlatSlot> ShardedState::flat_slots() const {
  std::vector<FlatSlot> slots;
  for (const auto& slot : flat_.slots()) slots.push_back({slot.name, slot.shape, slot.offset, slot.numel});
  return slots;
}

std::vector<FlatRange> ShardedState::flat_ranges(Range) const {
  const Partition& partition = flat_.partition();
  std::vector<FlatRange> out;
  if (options_.stage == 3) {
    ParameterStore& shard = flat_.shard();
    if (shard.resident().defined()) out.push_back({"param", shard.resident(), owned_});
    else  // swapped: read a part at a time as the checkpoint asks
      out.push_back({.name = "param",
                     .values = Tensor(),
                     .covers = owned_,
                     .stream = [&shard, begin = owned_.begin](Range part) {
                       return shard.read({part.begin - begin, part.end - begin});
                     },
                     .stream_dtype = shard.dtype()});
  }
  else out.push_back({"param", flat_.buffer(), {0, partition.padded_numel()}});
  for (FlatRange& state : shard_->flat_ranges(keeps_masters_)) out.push_back(std::move(state));
  return out;
}

void ShardedState::load_flat_ranges(const FlatReader& read, const SavedStates& saved) {
  autograd::NoGradGuard no_grad;
  // An f32 model takes the fp32 masters when the checkpoint has them.
  const std::string param_source = saved.has_master && !keeps_masters_ ? "master" : "param";
  const int64_t numel = flat_.partition().numel();
  if (options_.stage == 3) {
    ParameterStore& shard = flat_.shard();
    if (shard.resident().defined()) read(param_source, shard.resident(), owned_);  // in place
    else
      for (const ParameterStore::Piece& piece : shard.pieces()) {  // swapped: a piece at a time
        if (piece.range.size() == 0) continue;
        Tensor values;
        {
          MemoryTagScope tag(MemoryTag::Other);
          values = Tensor::empty({piece.range.size()}, shard.dtype());
        }
        read(param_source, values, {owned_.begin + piece.range.begin, owned_.begin + piece.range.end});
        shard.assign(piece.range, values);
      }
    shard.flush();
  } else read(param_source, flat_.buffer().narrow(0, 0, numel), {0, numel});
  shard_->load(read, saved, saved.has_master ? "master" : "param");
  if (gatherer_) gatherer_->reload_parameters();
}

int64_t ShardedState::optimizer_steps() const {
  return optimizer_ ? optimizer_step_count(*optimizer_, shard_->layout()) : 0;
}

std::vector<std::string> ShardedState::optimizer_state_names() const {
  return optimizer_ ? zero::optimizer_state_names(*optimizer_, shard_->layout()) : std::vector<std::string>{};
}

}  // namespace fathom::zero
