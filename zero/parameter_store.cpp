#include "zero/parameter_store.h"

#include <optional>

#include "core/error.h"
#include "core/memory_stats.h"
#include "offload/host_memory.h"
#include "zero/staged_parameters.h"
#include "zero/swapped_parameters.h"

namespace fathom::zero {
namespace {

class ResidentParameters final : public ParameterStore {
 public:
  ResidentParameters(Tensor shard, std::vector<Piece> pieces)
      : ParameterStore(std::move(pieces), shard.numel(), shard.dtype(), shard.device()), shard_(std::move(shard)) {}

  Tensor resident() const override { return shard_; }
  Tensor acquire(size_t piece) override { return read(pieces().at(piece).range); }
  void release(size_t) override {}
  bool gathers_ahead() const override { return true; }
  bool prefetch(size_t) override { return false; }
  void settle() override {}
  Tensor read(Range range) override { return shard_.narrow(0, range.begin, range.size()); }
  void assign(Range range, const Tensor& values) override { read(range).copy_(values); }
  void flush() override {}

 private:
  Tensor shard_;
};

}  // namespace

std::unique_ptr<ParameterStore> resident_parameters(Tensor shard, std::vector<ParameterStore::Piece> pieces) {
  return std::make_unique<ResidentParameters>(std::move(shard), std::move(pieces));
}

std::unique_ptr<ParameterStore> make_parameter_store(const ParameterOffload& offload,
                                                     std::vector<ParameterStore::Piece> pieces, int64_t numel,
                                                     DType dtype, Device device) {
  using Tier = ParameterOffload::Tier;
  // Offloaded with the model on a GPU: the shard on the host, each piece staged on the device.
  if (offload.tier != Tier::Device && !device.is_cpu())
    return std::make_unique<StagedParameters>(make_parameter_store(offload, std::move(pieces), numel, dtype, kCPU),
                                              device);
  if (offload.tier == Tier::Nvme) return std::make_unique<SwappedParameters>(offload, std::move(pieces), numel, dtype, device);
  std::optional<offload::HostTierScope> host;
  if (offload.tier == Tier::Host) host.emplace(offload.pin_memory);
  MemoryTagScope tag(MemoryTag::Parameters);
  return resident_parameters(Tensor::zeros({numel}, dtype, device), std::move(pieces));
}

}  // namespace fathom::zero
