#pragma once
// StagedParameters: a parameter shard kept on the host (offload_param cpu: the host tier; nvme:
// swap files) for a model on a GPU (the ParameterStore interface, zero/parameter_store.h). Each
// piece the gatherer acquires is copied to the device just before its all-gather and dropped when
// released; ranges (the optimizer's values, checkpoints) are read and assigned on the host side.

#include <map>
#include <memory>

#include "zero/parameter_store.h"

namespace fathom::zero {

class StagedParameters final : public ParameterStore {
 public:
  // `host`: the shard on the host; pieces are staged on `device`.
  StagedParameters(std::unique_ptr<ParameterStore> host, Device device);

  Tensor resident() const override { return {}; }  // not on the device as a whole
  Tensor acquire(size_t piece) override;
  void release(size_t piece) override;
  bool gathers_ahead() const override { return host_->gathers_ahead(); }
  bool prefetch(size_t piece) override { return host_->prefetch(piece); }
  void settle() override { host_->settle(); }
  void check_module(const std::string& module, int64_t elements) const override {
    host_->check_module(module, elements);
  }
  Tensor read(Range range) override { return host_->read(range); }
  void assign(Range range, const Tensor& values) override;
  void flush() override { host_->flush(); }
  std::optional<offload::IoEngine::Counters> io_counters() const override { return host_->io_counters(); }

 private:
  std::unique_ptr<ParameterStore> host_;
  // Pieces on the device until released: an all-gather in flight reads them.
  std::map<size_t, std::pair<Tensor, int>> staged_;  // piece -> (device copy, acquires)
};

}  // namespace fathom::zero
