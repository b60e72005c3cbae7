#include "parallel/vocab_parallel_cross_entropy.h"

#include <limits>
#include <string>

#include "autograd/custom_function.h"
#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/reduction.h"

namespace fathom::parallel {
namespace {

using autograd::TensorList;

// The kernel's ignore index for rows whose target another rank holds.
constexpr int64_t kLocalIgnore = -1;

class VocabParallelCrossEntropy : public autograd::Function {
 public:
  VocabParallelCrossEntropy(Tensor targets, VocabShard shard, std::shared_ptr<Communicator> group,
                            std::optional<double> normaliser, int64_t ignore_index)
      : targets_(std::move(targets)),
        shard_(shard),
        group_(std::move(group)),
        normaliser_(normaliser),
        ignore_index_(ignore_index) {}
  std::string name() const override { return "vocab_parallel_cross_entropy"; }

  TensorList forward(const TensorList& in) override {
    const Tensor& logits = in[0];
    logits_shape_ = logits.sizes();
    logits_dtype_ = logits.dtype();
    const int64_t columns = logits.size(-1), rows = columns == 0 ? 0 : logits.numel() / columns;
    FATHOM_CHECK(shard_.real_columns >= 0 && shard_.real_columns <= columns,
                 "vocab_parallel_cross_entropy: ", shard_.real_columns, " real columns of ", columns);
    FATHOM_CHECK(targets_.numel() == rows && targets_.dtype() == DType::I64, "vocab_parallel_cross_entropy: ", rows,
                 " rows of logits need as many i64 targets, got ", targets_.numel(), " ", dtype_name(targets_.dtype()));
    const DType acc = logits_dtype_ == DType::F64 ? DType::F64 : DType::F32;
    const Device device = logits.device();
    const Tensor matrix = logits.reshape({rows, columns});
    // This rank's real columns (a copy only where there is padding to leave out).
    real_ =
        shard_.real_columns == columns ? matrix.contiguous() : matrix.narrow(1, 0, shard_.real_columns).contiguous();
    const Tensor targets = targets_.reshape({rows});
    const auto scalar = [&](double v) { return Tensor::scalar(v, DType::I64, device); };
    const Tensor counted = ne(targets, scalar(static_cast<double>(ignore_index_))).to(DType::I64);
    counted_ = counted.to(acc);
    // Counted targets in this rank's range, as its column index; every other row ignored by the
    // kernel: (t − start + 1) · in_range − 1.
    const Tensor in_range =
        mul(mul(ge(targets, scalar(static_cast<double>(shard_.start))).to(DType::I64),
                lt(targets, scalar(static_cast<double>(shard_.start + shard_.real_columns))).to(DType::I64)),
            counted);
    in_range_ = in_range.to(acc);
    local_targets_ = add(mul(sub(targets, scalar(static_cast<double>(shard_.start + kLocalIgnore))), in_range),
                         scalar(kLocalIgnore));

    // The rank's log-sum-exps (−inf where it has no real column) and the sum of its targets'
    // logits: sum(lse over its target rows) − the kernel's loss (normaliser 1: the plain sum).
    Tensor mine = Tensor::zeros({rows + 1}, acc, device);  // [sum of exps per row | targets' logits]
    local_lse_ = Tensor::full({rows}, -std::numeric_limits<double>::infinity(), acc, device);
    if (shard_.real_columns > 0 && rows > 0) {
      const CrossEntropyOutputs local = cross_entropy(real_, local_targets_, /*normaliser=*/1.0, kLocalIgnore);
      local_lse_ = local.lse;  // the kernel's statistics dtype, f32 or f64: acc
      mine.narrow(0, rows, 1).copy_(sub(sum(mul(local_lse_, in_range_)), local.loss).reshape({1}));
    }
    Tensor shift = local_lse_.clone();
    group_->all_reduce(shift, ReduceOp::Max);
    mine.narrow(0, 0, rows).copy_(exp(sub(local_lse_, shift)));
    group_->all_reduce(mine);
    lse_ = add(shift, log(mine.narrow(0, 0, rows)));
    const Tensor target_logits = mine.narrow(0, rows, 1).reshape({});

    const double count = sum(counted_).item();
    scale_ = normaliser_.value_or(count);
    FATHOM_CHECK(scale_ > 0 || count == 0, "vocab_parallel_cross_entropy: the normaliser must be positive, got ",
                 scale_);
    const Tensor total = sub(sum(mul(lse_, counted_)), target_logits);
    return {count == 0 && !normaliser_ ? Tensor::zeros({}, acc, device) : div(total, scale_)};
  }

  // d logits = (softmax − onehot) · dloss / normaliser on counted rows; 0 on padding columns.
  // The kernel's backward over this rank's columns gives (local softmax − onehot) · dloss /
  // normaliser on its target rows plus dlse · local softmax on every row; the whole vocabulary's
  // softmax is the local one times w = exp(local lse − lse), so dlse = row scale · w, less the
  // row scale on target rows, which the kernel's own term already carries.
  TensorList backward(const TensorList& grads) override {
    const int64_t rows = real_.size(0), columns = logits_shape_.back();
    const Device device = real_.device();
    if (shard_.real_columns == 0 || scale_ <= 0 || rows == 0)
      return {Tensor::zeros(logits_shape_, logits_dtype_, device)};
    const Tensor dloss = grads[0].to(local_lse_.dtype()).reshape({});  // the kernel's statistics dtype
    const Tensor row_scale = mul(counted_, div(dloss, scale_));
    const Tensor dlse = mul(row_scale, sub(exp(sub(local_lse_, lse_)), in_range_));
    const Tensor dreal = Tensor::empty(real_.sizes(), logits_dtype_, device);
    cross_entropy_backward_into(dreal, dloss, real_, local_targets_, local_lse_, scale_, kLocalIgnore, dlse,
                                /*accumulate=*/false);
    if (shard_.real_columns == columns) return {dreal.reshape(logits_shape_)};
    const Tensor dlogits = Tensor::zeros({rows, columns}, logits_dtype_, device);
    dlogits.narrow(1, 0, shard_.real_columns).copy_(dreal);
    return {dlogits.reshape(logits_shape_)};
  }

 private:
  Tensor targets_;
  VocabShard shard_;
  std::shared_ptr<Communicator> group_;
  std::optional<double> normaliser_;
  int64_t ignore_index_;
  // Kept from forward for backward.
  Shape logits_shape_;
  DType logits_dtype_ = DType::F32;
  Tensor real_, lse_, local_lse_, in_range_, local_targets_, counted_;
  double scale_ = 1.0;
};

}  // namespace

autograd::Variable vocab_parallel_cross_entropy(const autograd::Variable& local_logits, const Tensor& targets,
                                                VocabShard shard, const std::shared_ptr<Communicator>& group,
                                                std::optional<double> normaliser, int64_t ignore_index) {
  FATHOM_CHECK(group != nullptr, "vocab_parallel_cross_entropy: no tensor-parallel group");
  FATHOM_CHECK(local_logits.dim() >= 1, "vocab_parallel_cross_entropy: logits need a vocabulary dimension");
  auto function = std::make_shared<VocabParallelCrossEntropy>(targets, shard, group, normaliser, ignore_index);
  return autograd::apply_function(function, {local_logits})[0];
}

}  // namespace fathom::parallel
