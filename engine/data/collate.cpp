#include "engine/data/collate.h"

namespace fathom {

namespace {

std::string describe(const Tensor& t) { return shape_str(t.sizes()) + " " + dtype_name(t.dtype()); }

Tensor stack(const std::vector<Sample>& samples, const std::vector<int64_t>& indices, const Tensor& like,
             Tensor Sample::*part, const char* name) {
  Shape shape = like.sizes();
  shape.insert(shape.begin(), static_cast<int64_t>(samples.size()));
  Tensor out = Tensor::empty(shape, like.dtype());
  for (size_t i = 0; i < samples.size(); ++i) {
    const Tensor& row = samples[i].*part;
    FATHOM_CHECK(row.sizes() == like.sizes() && row.dtype() == like.dtype(), "DataLoader: sample ", indices[i], "'s ",
                 name, " is ", describe(row), " but the dataset's first sample's is ", describe(like),
                 "; every sample must have the same shape and dtype to stack into a batch (pad or crop them)");
    out.select(0, static_cast<int64_t>(i)).copy_(row);
  }
  return out;
}

}  // namespace

Sample collate(const std::vector<Sample>& samples, const std::vector<int64_t>& indices, const Sample& like) {
  return {stack(samples, indices, like.input, &Sample::input, "input"),
          stack(samples, indices, like.target, &Sample::target, "target")};
}

}  // namespace fathom
