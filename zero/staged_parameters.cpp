#include "zero/staged_parameters.h"

#include "core/error.h"
#include "core/memory_stats.h"

namespace fathom::zero {

StagedParameters::StagedParameters(std::unique_ptr<ParameterStore> host, Device device)
    : ParameterStore(host->pieces(), host->numel(), host->dtype(), device), host_(std::move(host)) {
  FATHOM_CHECK(host_->device().is_cpu(), "StagedParameters: the shard must be on the host, not ",
               host_->device().str());
}

Tensor StagedParameters::acquire(size_t p) {
  auto [it, added] = staged_.try_emplace(p);
  if (added) {
    const Tensor values = host_->acquire(p);
    MemoryTagScope tag(MemoryTag::Parameters);
    it->second.first = values.to(device());
    host_->release(p);  // the host copy may be evicted: the device holds the values now
  }
  ++it->second.second;
  return it->second.first;
}

void StagedParameters::release(size_t p) {
  const auto it = staged_.find(p);
  FATHOM_CHECK(it != staged_.end(), "StagedParameters: \"", pieces().at(p).name, "\" released without being acquired");
  if (--it->second.second == 0) staged_.erase(it);
}

void StagedParameters::assign(Range range, const Tensor& values) {
  host_->assign(range, values.device().is_cpu() ? values : values.to(kCPU));
}

}  // namespace fathom::zero
