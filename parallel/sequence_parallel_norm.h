#pragma once
// A layer norm under sequence parallelism (Megatron's): each tensor-parallel rank normalises its
// own part of the sequence, so its gradient of the (replicated) weight and bias is a part of the
// whole one; the parameters enter through copy_to_tensor_region, whose backward sums those parts
// over the group, so every rank ends backward with the full gradient, as without sequence
// parallelism. nn::LayerNorm's (or nn::RMSNorm's) parameters and names.

#include <memory>

#include "nn/normalization.h"
#include "parallel/communicator.h"

namespace fathom::parallel {

class SequenceParallelLayerNorm : public nn::LayerNorm {
 public:
  SequenceParallelLayerNorm(int64_t dim, std::shared_ptr<Communicator> group, double eps = 1e-5, bool bias = true,
                            DType dtype = DType::F32);
  autograd::Variable forward(const autograd::Variable& x) override;  // (B, T / tp, C), this rank's positions
  std::string type_name() const override { return "SequenceParallelLayerNorm"; }

 private:
  std::shared_ptr<Communicator> group_;
};

// The same for the Llama family's RMSNorm.
class SequenceParallelRMSNorm : public nn::RMSNorm {
 public:
  SequenceParallelRMSNorm(int64_t dim, std::shared_ptr<Communicator> group, double eps = 1e-6, DType dtype = DType::F32);
  autograd::Variable forward(const autograd::Variable& x) override;  // (B, T / tp, C), this rank's positions
  std::string type_name() const override { return "SequenceParallelRMSNorm"; }

 private:
  std::shared_ptr<Communicator> group_;
};

}  // namespace fathom::parallel
