#include "zero/flat_parameters.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "nn/deferred_init.h"

namespace fathom::zero {
namespace {
int64_t total_numel(const FlatParameters::Named& params) {
  int64_t total = 0;
  for (const auto& [name, p] : params) total += p.numel();
  return total;
}
}  // namespace

FlatParameters::FlatParameters(const Named& params, int world_size, int rank, Storage storage,
                               const ParameterOffload& offload)
    : partition_(total_numel(params), world_size), storage_(storage) {
  FATHOM_CHECK(!params.empty(), "ZeRO: the model has no parameters");
  const DType dtype = params.front().second.dtype();
  device_ = params.front().second.device();
  int64_t offset = 0;
  for (const auto& [name, p] : params) {
    FATHOM_CHECK(p.dtype() == dtype, "ZeRO: parameters must share one dtype; \"", params.front().first, "\" is ",
                 dtype_name(dtype), " but \"", name, "\" is ", dtype_name(p.dtype()));
    FATHOM_CHECK(is_floating_point(dtype), "ZeRO: parameter \"", name, "\" is ", dtype_name(dtype),
                 ", not floating point");
    FATHOM_CHECK(p.device() == device_, "ZeRO: parameters must share one device; \"", params.front().first,
                 "\" is on ", device_.str(), " but \"", name, "\" is on ", p.device().str(),
                 "; call model.to(device) first");
    slots_.push_back({name, p, p.sizes(), offset, p.numel()});
    offset += p.numel();
  }
  autograd::NoGradGuard no_grad;
  const Range mine = partition_.owned(rank);
  std::vector<ParameterStore::Piece> pieces;
  for (const Slot& slot : slots_) {
    const Range overlap{std::max(slot.offset, mine.begin), std::min(slot.offset + slot.numel, mine.end)};
    pieces.push_back({slot.name, overlap.size() > 0 ? Range{overlap.begin - mine.begin, overlap.end - mine.begin}
                                                    : Range{}});
  }
  if (storage == Storage::Full) {
    FATHOM_CHECK(offload.tier == ParameterOffload::Tier::Device, "ZeRO: parameter offload (offload_param) needs "
                 "stage 3: stages 1-2 keep full parameters on every rank");
    buffer_ = empty_like(dtype, MemoryTag::Parameters);
    for (const Slot& slot : slots_) {
      FATHOM_CHECK(!nn::is_deferred(slot.param), "ZeRO: \"", slot.name, "\" was built under nn::DeferredInit (shard by "
                   "shard), which only stage 3 can take: stages 1-2 keep full parameters on every rank");
      Tensor view = buffer_.narrow(0, slot.offset, slot.numel).view(slot.param.sizes());
      view.copy_(slot.param.data());
      slot.param.set_data(view);
    }
    shard_ = resident_parameters(buffer_.narrow(0, mine.begin, mine.size()), std::move(pieces));
    return;
  }
  shard_ = make_parameter_store(offload, std::move(pieces), mine.size(), dtype, device_);
  // Slot by slot, each parameter's part goes into the shard and its full data is released; a
  // parameter built under nn::DeferredInit is made now, one at a time, in the model's dtype.
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Slot& slot = slots_[s];
    const Range piece = shard_->pieces()[s].range;
    if (piece.size() > 0) {
      const Tensor full = nn::is_deferred(slot.param) ? nn::initial_value(slot.param, slot.name).to(dtype)
                                                      : slot.param.data().contiguous();
      shard_->assign(piece, full.view({slot.numel}).narrow(0, piece.begin + mine.begin - slot.offset, piece.size()));
    }
    slot.param.set_data(released(dtype));
  }
  shard_->flush();
}

Tensor FlatParameters::released(DType dtype) const { return Tensor::empty({0}, dtype, device_); }

Tensor FlatParameters::empty_like(DType dtype, MemoryTag tag) const {
  MemoryTagScope scope(tag);
  return Tensor::zeros({partition_.padded_numel()}, dtype, device_);
}

void FlatParameters::attach_gradients(const Tensor& flat) const {
  for (const Slot& slot : slots_) slot.param.set_grad(flat.narrow(0, slot.offset, slot.numel).view(slot.param.sizes()));
}

}  // namespace fathom::zero
