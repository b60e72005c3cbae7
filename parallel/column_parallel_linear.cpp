#include "parallel/column_parallel_linear.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "parallel/tensor_parallel_init.h"

namespace fathom::parallel {

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool with_bias,
                                           bool gather, DType dtype, int64_t parts, bool sequence)
    : in_features(in),
      out_features(out),
      fused_parts(parts),
      local(group && parts > 0 ? shard_range(out / parts, group->size(), group->rank()) : ShardRange{}),
      gather_output(gather),
      sequence_parallel(sequence),
      group_(std::move(group)) {
  FATHOM_CHECK(group_ != nullptr, "ColumnParallelLinear: no tensor-parallel group");
  FATHOM_CHECK(in > 0 && out > 0, "ColumnParallelLinear: feature counts must be positive, got ", in, " -> ", out);
  FATHOM_CHECK(parts >= 1 && out % parts == 0, "ColumnParallelLinear: ", out, " output features do not make ", parts,
               " equal fused parts");
  FATHOM_CHECK(!(gather && parts > 1), "ColumnParallelLinear: gather_output with fused parts would interleave them");
  FATHOM_CHECK(!(gather && sequence), "ColumnParallelLinear: gather_output with sequence parallelism is not supported");
  FATHOM_CHECK(out / parts >= group_->size(), "ColumnParallelLinear: ", out / parts,
               " output features cannot be split over ", group_->size(),
               " tensor-parallel ranks; use a tensor-parallel size of at most ", out / parts);
  MemoryTagScope tag(MemoryTag::Parameters);
  const nn::Placement placement =
      nn::Placement::shard(0, group_->size(), group_->rank(), out, 0, static_cast<int>(parts));
  weight = register_parameter("weight", Tensor::empty({local_out_features(), in}, dtype));
  set_placement("weight", placement);
  if (with_bias) {
    bias = register_parameter("bias", Tensor::zeros({local_out_features()}, dtype));
    set_placement("bias", placement);
  }
  load_full(draw_full_linear_weight(in, out, dtype));
}

void ColumnParallelLinear::load_full(const Tensor& full_weight, const Tensor& full_bias) {
  FATHOM_CHECK((full_weight.sizes() == Shape{out_features, in_features}), "ColumnParallelLinear.load_full: weight of ",
               "shape ", shape_str(full_weight.sizes()), ", expected [", out_features, ", ", in_features, "]");
  FATHOM_CHECK(!full_bias.defined() || bias.defined(),
               "ColumnParallelLinear.load_full: a bias given to a layer "
               "without one");
  FATHOM_CHECK(!full_bias.defined() || full_bias.sizes() == Shape{out_features},
               "ColumnParallelLinear.load_full: bias of shape ", shape_str(full_bias.sizes()), ", expected [",
               out_features, "]");
  autograd::NoGradGuard no_grad;
  // This rank's slice of each part, part after part.
  weight.data().copy_(nn::shard_of(full_weight, placement("weight")));
  if (full_bias.defined()) bias.data().copy_(nn::shard_of(full_bias, placement("bias")));
}

Variable ColumnParallelLinear::forward(const Variable& x) {
  FATHOM_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "ColumnParallelLinear: input of shape ", shape_str(x.sizes()),
               " does not end in in_features = ", in_features);
  FATHOM_CHECK(!sequence_parallel || x.dim() == 3,
               "ColumnParallelLinear: with sequence parallelism the input is (B, T / tp, C), got ",
               shape_str(x.sizes()));
  const Variable replicated = sequence_parallel ? gather_from_sequence_region(x, group_, x.size(1) * group_->size())
                                                : copy_to_tensor_region(x, group_);
  const Shape in_shape = replicated.sizes();
  const Variable rows = x.dim() == 2 ? replicated : autograd::reshape(replicated, {-1, in_features});
  Variable y = autograd::matmul(rows, weight, false, /*transpose_b=*/true);
  if (bias.defined()) y = autograd::add(y, bias);
  if (x.dim() != 2) {
    Shape out_shape = in_shape;
    out_shape.back() = local_out_features();
    y = autograd::reshape(y, out_shape);
  }
  return gather_output ? gather_from_tensor_region(y, group_, out_features) : y;
}

}  // namespace fathom::parallel
