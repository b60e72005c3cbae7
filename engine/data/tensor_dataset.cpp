#include "engine/data/tensor_dataset.h"

namespace fathom {

TensorDataset::TensorDataset(Tensor inputs, Tensor targets) : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  FATHOM_CHECK(inputs_.defined() && targets_.defined(), "TensorDataset: inputs and targets must both be defined tensors");
  FATHOM_CHECK(inputs_.dim() >= 1 && targets_.dim() >= 1, "TensorDataset: inputs ", shape_str(inputs_.sizes()),
               " and targets ", shape_str(targets_.sizes()),
               " need a first (sample) dimension; reshape a single sample to [1, ...]");
  FATHOM_CHECK(inputs_.size(0) == targets_.size(0), "TensorDataset: inputs ", shape_str(inputs_.sizes()), " and targets ",
               shape_str(targets_.sizes()), " have different sample counts (first dimension ", inputs_.size(0), " vs ",
               targets_.size(0), ")");
  FATHOM_CHECK(inputs_.size(0) >= 1, "TensorDataset: inputs ", shape_str(inputs_.sizes()), " hold no samples");
  FATHOM_CHECK(inputs_.device().is_cpu() && targets_.device().is_cpu(), "TensorDataset: inputs (", inputs_.device().str(),
               ") and targets (", targets_.device().str(), ") must be CPU tensors; the engine moves each micro-batch to the device");
}

Sample TensorDataset::get(int64_t index) const {
  check_index(index, "TensorDataset");
  return {inputs_.select(0, index), targets_.select(0, index)};
}

}  // namespace fathom
