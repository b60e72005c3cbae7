#include "parallel/column_parallel_linear.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "parallel/tensor_parallel_init.h"

namespace fathom::parallel {

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool with_bias,
                                           bool gather, DType dtype)
    : in_features(in),
      out_features(out),
      local(group ? shard_range(out, group->size(), group->rank()) : ShardRange{}),
      gather_output(gather),
      group_(std::move(group)) {
  FATHOM_CHECK(group_ != nullptr, "ColumnParallelLinear: no tensor-parallel group");
  FATHOM_CHECK(in > 0 && out > 0, "ColumnParallelLinear: feature counts must be positive, got ", in, " -> ", out);
  FATHOM_CHECK(out >= group_->size(), "ColumnParallelLinear: ", out, " output features cannot be split over ",
               group_->size(), " tensor-parallel ranks; use a tensor-parallel size of at most ", out);
  MemoryTagScope tag(MemoryTag::Parameters);
  weight = register_parameter("weight", Tensor::empty({local.length, in}, dtype));
  set_placement("weight", nn::Placement::shard(0, group_->size(), group_->rank()));
  if (with_bias) {
    bias = register_parameter("bias", Tensor::zeros({local.length}, dtype));
    set_placement("bias", nn::Placement::shard(0, group_->size(), group_->rank()));
  }
  load_full(draw_full_linear_weight(in, out, dtype));
}

void ColumnParallelLinear::load_full(const Tensor& full_weight, const Tensor& full_bias) {
  FATHOM_CHECK((full_weight.sizes() == Shape{out_features, in_features}),
               "ColumnParallelLinear.load_full: weight of "
               "shape ",
               shape_str(full_weight.sizes()), ", expected [", out_features, ", ", in_features, "]");
  autograd::NoGradGuard no_grad;
  weight.data().copy_(full_weight.narrow(0, local.offset, local.length));
  if (!full_bias.defined()) return;
  FATHOM_CHECK(bias.defined(), "ColumnParallelLinear.load_full: a bias given to a layer without one");
  FATHOM_CHECK(full_bias.sizes() == Shape{out_features}, "ColumnParallelLinear.load_full: bias of shape ",
               shape_str(full_bias.sizes()), ", expected [", out_features, "]");
  bias.data().copy_(full_bias.narrow(0, local.offset, local.length));
}

Variable ColumnParallelLinear::forward(const Variable& x) {
  FATHOM_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "ColumnParallelLinear: input of shape ", shape_str(x.sizes()),
               " does not end in in_features = ", in_features);
  const Variable replicated = copy_to_tensor_region(x, group_);
  const Shape in_shape = x.sizes();
  const Variable rows = x.dim() == 2 ? replicated : autograd::reshape(replicated, {-1, in_features});
  Variable y = autograd::matmul(rows, weight, false, /*transpose_b=*/true);
  if (bias.defined()) y = autograd::add(y, bias);
  if (x.dim() != 2) {
    Shape out_shape = in_shape;
    out_shape.back() = local.length;
    y = autograd::reshape(y, out_shape);
  }
  return gather_output ? gather_from_tensor_region(y, group_, out_features) : y;
}

}  // namespace fathom::parallel
