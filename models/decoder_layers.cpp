#include "models/decoder_layers.h"

#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/normalization.h"
#include "nn/placement.h"
#include "parallel/column_parallel_linear.h"
#include "parallel/replicated_linear.h"
#include "parallel/row_parallel_linear.h"
#include "parallel/sequence_parallel_norm.h"
#include "parallel/tensor_parallel_regions.h"
#include "parallel/vocab_parallel_cross_entropy.h"
#include "parallel/vocab_parallel_embedding.h"

namespace fathom::models {

std::shared_ptr<nn::Module> DecoderLayers::column(int64_t in, int64_t out, bool bias, DType dtype) const {
  return std::make_shared<nn::Linear>(in, out, bias, dtype);
}
std::shared_ptr<nn::Module> DecoderLayers::row(int64_t in, int64_t out, bool bias, DType dtype) const {
  return std::make_shared<nn::Linear>(in, out, bias, dtype);
}
std::shared_ptr<nn::Module> DecoderLayers::embedding(int64_t vocab, int64_t dim, DType dtype) const {
  return std::make_shared<nn::Embedding>(vocab, dim, dtype);
}
std::shared_ptr<nn::Module> DecoderLayers::head(int64_t dim, int64_t vocab, DType dtype, const Variable& tied) const {
  if (tied.defined()) return std::make_shared<nn::Linear>(tied);
  return std::make_shared<nn::Linear>(dim, vocab, false, dtype);
}
std::shared_ptr<nn::Module> DecoderLayers::norm(const DecoderConfig& c) const {
  if (c.norm == Norm::LayerNorm) return std::make_shared<nn::LayerNorm>(c.hidden_size, c.norm_eps, c.norm_bias, c.dtype);
  return std::make_shared<nn::RMSNorm>(c.hidden_size, c.norm_eps, c.dtype);
}

Variable DecoderLayers::loss(const Variable& logits, const Tensor& targets, std::optional<double> normaliser) const {
  return nn::cross_entropy(logits, targets, normaliser);
}

TensorParallelDecoderLayers::TensorParallelDecoderLayers(std::shared_ptr<parallel::Communicator> group,
                                                         bool sequence_parallel)
    : group_(std::move(group)), sequence_parallel_(sequence_parallel) {
  FATHOM_CHECK(group_ != nullptr, "TensorParallelDecoderLayers: no tensor-parallel group");
}

int TensorParallelDecoderLayers::tensor_parallel_size() const { return group_->size(); }
int TensorParallelDecoderLayers::tensor_parallel_rank() const { return group_->rank(); }

std::shared_ptr<nn::Module> TensorParallelDecoderLayers::column(int64_t in, int64_t out, bool bias, DType dtype) const {
  return std::make_shared<parallel::ColumnParallelLinear>(in, out, group_, bias, /*gather_output=*/false, dtype,
                                                          /*fused_parts=*/1, sequence_parallel_);
}

std::shared_ptr<nn::Module> TensorParallelDecoderLayers::row(int64_t in, int64_t out, bool bias, DType dtype) const {
  return std::make_shared<parallel::RowParallelLinear>(in, out, group_, bias, /*input_is_parallel=*/true, dtype,
                                                       sequence_parallel_);
}

std::shared_ptr<nn::Module> TensorParallelDecoderLayers::replicated(int64_t in, int64_t out, bool bias,
                                                                    DType dtype) const {
  return std::make_shared<parallel::ReplicatedLinear>(in, out, group_, bias, dtype, sequence_parallel_);
}

std::shared_ptr<nn::Module> TensorParallelDecoderLayers::embedding(int64_t vocab, int64_t dim, DType dtype) const {
  vocab_ = vocab;
  return std::make_shared<parallel::VocabParallelEmbedding>(vocab, dim, group_, dtype);
}

std::shared_ptr<nn::Module> TensorParallelDecoderLayers::head(int64_t dim, int64_t vocab, DType dtype,
                                                              const Variable& tied) const {
  vocab_ = vocab;
  if (tied.defined()) return std::make_shared<nn::Linear>(tied);  // the embedding's rows: placed already
  // Untied: this rank's rows of the padded vocabulary, placed as the embedding's are.
  const int tp = group_->size(), rank = group_->rank();
  const int64_t padded = parallel::padded_vocab_size(vocab, tp);
  auto head = std::make_shared<nn::Linear>(dim, nn::shard_range(padded, tp, rank).length, false, dtype);
  head->set_placement("weight", nn::Placement::shard(0, tp, rank, vocab, padded));
  return head;
}

std::shared_ptr<nn::Module> TensorParallelDecoderLayers::norm(const DecoderConfig& c) const {
  if (!sequence_parallel_) return DecoderLayers::norm(c);
  if (c.norm == Norm::LayerNorm)
    return std::make_shared<parallel::SequenceParallelLayerNorm>(c.hidden_size, group_, c.norm_eps, c.norm_bias, c.dtype);
  return std::make_shared<parallel::SequenceParallelRMSNorm>(c.hidden_size, group_, c.norm_eps, c.dtype);
}

Variable TensorParallelDecoderLayers::enter(const Variable& embeddings) const {
  if (!sequence_parallel_) return embeddings;
  const int64_t T = embeddings.size(1), tp = group_->size();
  FATHOM_CHECK(T % tp == 0, "with sequence parallelism the sequence length ", T,
               " must be divisible by the tensor-parallel size ", tp, "; use sequences of a multiple of ", tp, " tokens");
  return parallel::scatter_to_sequence_region(embeddings, group_);
}

int64_t TensorParallelDecoderLayers::sequence_length(const Variable& x) const {
  return x.size(1) * (sequence_parallel_ ? group_->size() : 1);
}

Variable TensorParallelDecoderLayers::head_input(const Variable& x) const {
  if (sequence_parallel_) return parallel::gather_from_sequence_region(x, group_, sequence_length(x));
  return parallel::copy_to_tensor_region(x, group_);
}

Variable TensorParallelDecoderLayers::loss(const Variable& logits, const Tensor& targets,
                                           std::optional<double> normaliser) const {
  const int tp = group_->size();
  const nn::ShardRange local = nn::shard_range(parallel::padded_vocab_size(vocab_, tp), tp, group_->rank());
  const int64_t real = std::clamp<int64_t>(vocab_ - local.offset, 0, local.length);
  return parallel::vocab_parallel_cross_entropy(logits, targets, {local.offset, real}, group_, normaliser);
}

Tensor TensorParallelDecoderLayers::full_logits(const Tensor& logits) const {
  const int64_t padded = parallel::padded_vocab_size(vocab_, group_->size());
  return parallel::gather_along(logits, -1, padded, *group_).narrow(-1, 0, vocab_).contiguous();
}

}  // namespace fathom::models
