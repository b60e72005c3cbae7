#pragma once
// Cross-entropy over logits whose vocabulary is split over the tensor-parallel group, without
// gathering them (Megatron's vocab_parallel_cross_entropy): each rank holds logits [..., V_local]
// for the vocabulary ids [vocab_start, vocab_start + V_local), of which the first `real_columns`
// are real and the rest padding (parallel/vocab_parallel_embedding.h), treated as −inf — so the
// loss is that of the unpadded vocabulary and padding columns get no gradient. Each rank runs the
// fused cross-entropy kernel over its real columns (kernels/cross_entropy.h: one pass forward, one
// backward, no probabilities stored), with the targets outside its range ignored; that gives its
// rows' log-sum-exps and the sum of its targets' logits. Per row two all-reduces of one value —
// the maximum of the ranks' log-sum-exps and the sum of their exps — and one of a scalar, the
// targets' logits summed (it rides with the second). Targets are global ids, the same on every rank;
// `ignore_index` and the normaliser mean what they mean for fathom::cross_entropy
// (kernels/cross_entropy.h): the sum over non-ignored rows of −log p[target] / normaliser, by
// default the number of non-ignored targets.

#include <memory>
#include <optional>

#include "autograd/variable.h"
#include "kernels/cross_entropy.h"
#include "parallel/communicator.h"

namespace fathom::parallel {

struct VocabShard {
  int64_t start = 0;         // the first vocabulary id of this rank's columns
  int64_t real_columns = 0;  // how many of its columns are real ids (the rest are padding)
};

autograd::Variable vocab_parallel_cross_entropy(const autograd::Variable& local_logits, const Tensor& targets,
                                                VocabShard shard, const std::shared_ptr<Communicator>& group,
                                                std::optional<double> normaliser = std::nullopt,
                                                int64_t ignore_index = kDefaultIgnoreIndex);

}  // namespace fathom::parallel
