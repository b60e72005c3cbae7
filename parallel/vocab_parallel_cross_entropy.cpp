#include "parallel/vocab_parallel_cross_entropy.h"

#include <limits>
#include <string>

#include "autograd/custom_function.h"
#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/reduction.h"

namespace fathom::parallel {
namespace {

using autograd::TensorList;

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
    real_ = logits.reshape({rows, columns}).narrow(1, 0, shard_.real_columns).to(acc).contiguous();
    const Tensor targets = targets_.reshape({rows});

    // Each rank's log-sum-exp over its real columns (−inf where it has none), then the row's.
    Tensor local_lse = Tensor::full({rows}, -std::numeric_limits<double>::infinity(), acc, device);
    if (shard_.real_columns > 0) {
      const Tensor m = max(real_, {1}, /*keepdim=*/true);
      local_lse = add(m.squeeze(1), log(sum(exp(sub(real_, m)), {1})));
    }
    Tensor shift = local_lse.clone();
    group_->all_reduce(shift, ReduceOp::Max);
    Tensor sum_exp = exp(sub(local_lse, shift));
    group_->all_reduce(sum_exp);
    lse_ = add(shift, log(sum_exp));

    // The target's logit, from the rank whose columns hold it.
    const Tensor start = Tensor::scalar(static_cast<double>(shard_.start), DType::I64, device);
    const Tensor end = Tensor::scalar(static_cast<double>(shard_.start + shard_.real_columns), DType::I64, device);
    in_range_ = mul(ge(targets, start).to(DType::I64), lt(targets, end).to(DType::I64));
    Tensor target_logit = Tensor::zeros({rows}, acc, device);
    if (shard_.real_columns > 0) {
      const Tensor row_base = mul(Tensor::arange(rows, DType::I64, device), static_cast<double>(shard_.real_columns));
      flat_target_ = add(row_base, mul(sub(targets, start), in_range_));
      target_logit = mul(embedding(flat_target_, real_.reshape({-1, 1})).reshape({rows}), in_range_.to(acc));
    }
    group_->all_reduce(target_logit);

    counted_ = ne(targets, Tensor::scalar(static_cast<double>(ignore_index_), DType::I64, device)).to(acc);
    const double count = sum(counted_).item();
    scale_ = normaliser_.value_or(count);
    FATHOM_CHECK(scale_ > 0 || count == 0, "vocab_parallel_cross_entropy: the normaliser must be positive, got ",
                 scale_);
    const Tensor total = sum(mul(sub(lse_, target_logit), counted_));
    return {count == 0 && !normaliser_ ? Tensor::zeros({}, acc, device) : div(total, scale_)};
  }

  // d logits = (softmax − onehot) · dloss / normaliser on non-ignored rows; 0 on padding columns.
  TensorList backward(const TensorList& grads) override {
    const int64_t rows = real_.size(0), columns = logits_shape_.back();
    const Tensor dlogits = Tensor::zeros({rows, columns}, logits_dtype_, real_.device());
    if (shard_.real_columns > 0 && scale_ > 0) {
      const Tensor row_scale = mul(counted_, div(grads[0].to(real_.dtype()), scale_)).unsqueeze(1);
      Tensor d = mul(exp(sub(real_, lse_.unsqueeze(1))), row_scale);
      const Tensor onehot = embedding_backward(mul(row_scale, in_range_.to(real_.dtype()).unsqueeze(1)), flat_target_,
                                               rows * shard_.real_columns);
      d = sub(d, onehot.reshape({rows, shard_.real_columns}));
      dlogits.narrow(1, 0, shard_.real_columns).copy_(d);
    }
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
  Tensor real_, lse_, in_range_, flat_target_, counted_;
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
