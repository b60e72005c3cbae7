#include "zero/flat_parameters.h"

#include <algorithm>
#include <optional>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/memory_stats.h"

namespace fathom::zero {
namespace {
int64_t total_numel(const FlatParameters::Named& params) {
  int64_t total = 0;
  for (const auto& [name, p] : params) total += p.numel();
  return total;
}
}  // namespace

FlatParameters::FlatParameters(const Named& params, int world_size, int rank, Storage storage,
                               Allocator* shard_allocator)
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
  if (storage == Storage::Full) {
    buffer_ = empty_like(dtype, MemoryTag::Parameters);
    for (const Slot& slot : slots_) {
      Tensor view = buffer_.narrow(0, slot.offset, slot.numel).view(slot.param.sizes());
      view.copy_(slot.param.data());
      slot.param.set_data(view);
    }
    owned_ = buffer_.narrow(0, mine.begin, mine.size());
    return;
  }
  {
    MemoryTagScope tag(MemoryTag::Parameters);
    std::optional<HostAllocatorScope> tier;
    if (shard_allocator != nullptr) {
      FATHOM_CHECK(device_.is_cpu(), "ZeRO: parameter offload (offload_param) with the model on ", device_.str(),
                   " is not built yet (the shard would need copying to the device before each all-gather); keep "
                   "the model on the host or set offload_param.device \"none\"");
      tier.emplace(*shard_allocator);
    }
    owned_ = Tensor::zeros({mine.size()}, dtype, device_);
  }
  for (const Slot& slot : slots_) {
    const Range overlap{std::max(slot.offset, mine.begin), std::min(slot.offset + slot.numel, mine.end)};
    if (overlap.size() > 0)
      owned_.narrow(0, overlap.begin - mine.begin, overlap.size())
          .copy_(slot.param.data().contiguous().view({slot.numel}).narrow(0, overlap.begin - slot.offset, overlap.size()));
    slot.param.set_data(released(dtype));
  }
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
