#include "parallel/row_parallel_linear.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "parallel/tensor_parallel_init.h"

namespace fathom::parallel {

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool with_bias,
                                     bool parallel_input, DType dtype, bool sequence)
    : in_features(in),
      out_features(out),
      local(group ? shard_range(in, group->size(), group->rank()) : ShardRange{}),
      input_is_parallel(parallel_input),
      sequence_parallel(sequence),
      group_(std::move(group)) {
  FATHOM_CHECK(group_ != nullptr, "RowParallelLinear: no tensor-parallel group");
  FATHOM_CHECK(in > 0 && out > 0, "RowParallelLinear: feature counts must be positive, got ", in, " -> ", out);
  FATHOM_CHECK(in >= group_->size(), "RowParallelLinear: ", in, " input features cannot be split over ", group_->size(),
               " tensor-parallel ranks; use a tensor-parallel size of at most ", in);
  MemoryTagScope tag(MemoryTag::Parameters);
  weight = register_parameter("weight", Tensor::empty({out, local.length}, dtype));
  set_placement("weight", nn::Placement::shard(1, group_->size(), group_->rank(), in));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}, dtype));  // replicated
  load_full(draw_full_linear_weight(in, out, dtype));
}

void RowParallelLinear::load_full(const Tensor& full_weight, const Tensor& full_bias) {
  FATHOM_CHECK((full_weight.sizes() == Shape{out_features, in_features}),
               "RowParallelLinear.load_full: weight of "
               "shape ",
               shape_str(full_weight.sizes()), ", expected [", out_features, ", ", in_features, "]");
  autograd::NoGradGuard no_grad;
  weight.data().copy_(nn::shard_of(full_weight, placement("weight")));
  if (!full_bias.defined()) return;
  FATHOM_CHECK(bias.defined(), "RowParallelLinear.load_full: a bias given to a layer without one");
  FATHOM_CHECK(full_bias.sizes() == Shape{out_features}, "RowParallelLinear.load_full: bias of shape ",
               shape_str(full_bias.sizes()), ", expected [", out_features, "]");
  bias.data().copy_(full_bias);
}

Variable RowParallelLinear::forward(const Variable& x) {
  const Variable mine = input_is_parallel ? x : scatter_to_tensor_region(x, group_);
  FATHOM_CHECK(mine.dim() >= 1 && mine.size(-1) == local.length, "RowParallelLinear: input of shape ",
               shape_str(mine.sizes()), " on tensor-parallel rank ", group_->rank(), " of ", group_->size(),
               " should end in its ", local.length, " of the ", in_features, " input features",
               input_is_parallel ? " (the input is taken as already split: input_is_parallel)" : "");
  FATHOM_CHECK(!sequence_parallel || mine.dim() == 3,
               "RowParallelLinear: with sequence parallelism the input is (B, T, local features), got ",
               shape_str(mine.sizes()));
  const Shape in_shape = mine.sizes();
  const Variable rows = mine.dim() == 2 ? mine : autograd::reshape(mine, {-1, local.length});
  Variable y = autograd::matmul(rows, weight, false, /*transpose_b=*/true);
  if (mine.dim() != 2) {
    Shape out_shape = in_shape;
    out_shape.back() = out_features;
    y = autograd::reshape(y, out_shape);
  }
  if (sequence_parallel) {
    y = reduce_scatter_to_sequence_region(y, group_);
    return bias.defined() ? autograd::add(y, copy_to_tensor_region(bias, group_)) : y;
  }
  y = reduce_from_tensor_region(y, group_);
  return bias.defined() ? autograd::add(y, bias) : y;
}

}  // namespace fathom::parallel
