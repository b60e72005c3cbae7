#include "parallel/tensor_parallel_regions.h"

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/custom_function.h"
#include "core/error.h"
#include "core/shape.h"

namespace fathom::parallel {

namespace {

// Element counts of every rank's piece: the piece's shape with `dim` set to each rank's length.
std::vector<int64_t> piece_counts(const Shape& piece_shape, int64_t dim, int64_t full_size, int parts) {
  const int64_t others = piece_shape[dim] == 0 ? 0 : shape_numel(piece_shape) / piece_shape[dim];
  std::vector<int64_t> counts(parts);
  for (int r = 0; r < parts; ++r) counts[r] = others * shard_range(full_size, parts, r).length;
  return counts;
}

}  // namespace

Tensor gather_along(const Tensor& piece, int64_t dim, int64_t full_size, Communicator& group) {
  dim = normalize_dim(dim, piece.dim(), "gather_along");
  const int parts = group.size();
  const ShardRange mine = shard_range(full_size, parts, group.rank());
  FATHOM_CHECK(piece.size(dim) == mine.length, "tensor parallelism: rank ", group.rank(), " of ", parts, " holds ",
               piece.size(dim), " of the ", full_size, " entries of dim ", dim, " of ", shape_str(piece.sizes()),
               "; it should hold ", mine.length);
  const std::vector<int64_t> counts = piece_counts(piece.sizes(), dim, full_size, parts);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  const Tensor flat = Tensor::empty({total}, piece.dtype(), piece.device());
  group.all_gather_v(piece.contiguous().reshape({-1}), flat, counts);
  Shape full_shape = piece.sizes();
  full_shape[dim] = full_size;
  if (dim == 0) return flat.view(full_shape);
  // Each rank's piece is contiguous in `flat`; it goes to its range of `dim`.
  const Tensor out = Tensor::empty(full_shape, piece.dtype(), piece.device());
  int64_t at = 0;
  for (int r = 0; r < parts; ++r) {
    const ShardRange range = shard_range(full_size, parts, r);
    Shape shape = piece.sizes();
    shape[dim] = range.length;
    out.narrow(dim, range.offset, range.length).copy_(flat.narrow(0, at, counts[r]).view(shape));
    at += counts[r];
  }
  return out;
}

Tensor slice_along(const Tensor& whole, int64_t dim, const Communicator& group) {
  dim = normalize_dim(dim, whole.dim(), "slice_along");
  const ShardRange mine = shard_range(whole.size(dim), group.size(), group.rank());
  return whole.narrow(dim, mine.offset, mine.length).contiguous();
}

Tensor reduce_scatter_along(const Tensor& whole, int64_t dim, Communicator& group) {
  dim = normalize_dim(dim, whole.dim(), "reduce_scatter_along");
  const int parts = group.size();
  const int64_t full_size = whole.size(dim);
  Shape mine_shape = whole.sizes();
  mine_shape[dim] = shard_range(full_size, parts, group.rank()).length;
  const std::vector<int64_t> counts = piece_counts(mine_shape, dim, full_size, parts);
  // Rank r's piece of every rank's input must be contiguous and in rank order.
  const Tensor send = dim == 0 ? whole.contiguous() : Tensor::empty({whole.numel()}, whole.dtype(), whole.device());
  if (dim != 0) {
    int64_t at = 0;
    for (int r = 0; r < parts; ++r) {
      const ShardRange range = shard_range(full_size, parts, r);
      Shape shape = whole.sizes();
      shape[dim] = range.length;
      send.narrow(0, at, counts[r]).view(shape).copy_(whole.narrow(dim, range.offset, range.length));
      at += counts[r];
    }
  }
  const Tensor out = Tensor::empty(mine_shape, whole.dtype(), whole.device());
  group.reduce_scatter_v(send.reshape({-1}), out.reshape({-1}), counts);
  return out;
}

namespace {

using autograd::Function;
using autograd::TensorList;

// One region op: what forward and backward do to a tensor.
class Region : public Function {
 public:
  enum class Step { Identity, AllReduce, Slice, Gather, ReduceScatter };
  Region(const char* name, Step forward, Step backward, int64_t dim, int64_t full_size,
         std::shared_ptr<Communicator> group)
      : name_(name),
        forward_(forward),
        backward_(backward),
        dim_(dim),
        full_size_(full_size),
        group_(std::move(group)) {
    FATHOM_CHECK(group_ != nullptr, name_, ": no tensor-parallel group");
  }
  std::string name() const override { return name_; }
  TensorList forward(const TensorList& in) override {
    if (forward_ == Step::Slice || forward_ == Step::ReduceScatter) full_size_ = in[0].size(dim_);
    return {apply(forward_, in[0])};
  }
  TensorList backward(const TensorList& grads) override { return {apply(backward_, grads[0])}; }

 private:
  Tensor apply(Step step, const Tensor& t) {
    switch (step) {
      case Step::Identity:
        return t;
      case Step::AllReduce: {
        const Tensor sum = t.clone();  // a fresh contiguous copy, reduced in place
        group_->all_reduce(sum);
        return sum;
      }
      case Step::Slice:
        return slice_along(t, dim_, *group_);
      case Step::Gather:
        return gather_along(t, dim_, full_size_, *group_);
      case Step::ReduceScatter:
        return reduce_scatter_along(t, dim_, *group_);
    }
    return t;
  }

  const char* name_;
  Step forward_, backward_;
  int64_t dim_, full_size_;
  std::shared_ptr<Communicator> group_;
};

Variable region(const Variable& x, const char* name, Region::Step forward, Region::Step backward, int64_t dim,
                int64_t full_size, const std::shared_ptr<Communicator>& group) {
  FATHOM_CHECK(x.dim() > 0 || dim == 0, name, ": a 0-d tensor has no dimension to split");
  const int64_t d = x.dim() == 0 ? 0 : normalize_dim(dim, x.dim(), name);
  return autograd::apply_function(std::make_shared<Region>(name, forward, backward, d, full_size, group), {x})[0];
}

using Step = Region::Step;

}  // namespace

Variable copy_to_tensor_region(const Variable& x, const std::shared_ptr<Communicator>& group) {
  return region(x, "copy_to_tensor_region", Step::Identity, Step::AllReduce, 0, 0, group);
}
Variable reduce_from_tensor_region(const Variable& x, const std::shared_ptr<Communicator>& group) {
  return region(x, "reduce_from_tensor_region", Step::AllReduce, Step::Identity, 0, 0, group);
}
Variable scatter_to_tensor_region(const Variable& x, const std::shared_ptr<Communicator>& group) {
  return region(x, "scatter_to_tensor_region", Step::Slice, Step::Gather, -1, 0, group);
}
Variable gather_from_tensor_region(const Variable& x, const std::shared_ptr<Communicator>& group, int64_t full_size) {
  return region(x, "gather_from_tensor_region", Step::Gather, Step::Slice, -1, full_size, group);
}
Variable scatter_to_sequence_region(const Variable& x, const std::shared_ptr<Communicator>& group) {
  return region(x, "scatter_to_sequence_region", Step::Slice, Step::Gather, kSequenceDim, 0, group);
}
Variable gather_from_sequence_region(const Variable& x, const std::shared_ptr<Communicator>& group,
                                     int64_t full_length) {
  return region(x, "gather_from_sequence_region", Step::Gather, Step::ReduceScatter, kSequenceDim, full_length, group);
}
Variable reduce_scatter_to_sequence_region(const Variable& x, const std::shared_ptr<Communicator>& group) {
  return region(x, "reduce_scatter_to_sequence_region", Step::ReduceScatter, Step::Gather, kSequenceDim, 0, group);
}

}  // namespace fathom::parallel
