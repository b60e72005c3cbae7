#pragma once
// An embedding table whose rows — the vocabulary — are split over the tensor-parallel group
// (Megatron's VocabParallelEmbedding). The vocabulary is padded to a multiple of 128 × tp so that
// every rank holds the same number of rows, padded_vocab_size(vocab, tp) / tp; the padded rows are
// zero, are never looked up (ids are below `num_embeddings`) and so never receive a gradient.
// Each rank looks up the ids in its range, contributes zeros for the others, and the results are
// summed over the group (reduce_from_tensor_region). The padded size depends on tp: what a
// checkpoint or an export holds is the `num_embeddings` real rows (load_full takes those).

#include <memory>

#include "nn/module.h"
#include "parallel/communicator.h"
#include "parallel/tensor_parallel_regions.h"

namespace fathom::parallel {

// `vocab` rounded up to a multiple of 128 × tp.
int64_t padded_vocab_size(int64_t vocab, int tensor_parallel_size);

class VocabParallelEmbedding : public nn::Module {
 public:
  // Initialised as nn::Embedding is — N(0, 1) over the real rows, drawn whole on every rank and
  // sliced — so the model is the same at every tensor-parallel size.
  VocabParallelEmbedding(int64_t num_embeddings, int64_t embedding_dim, std::shared_ptr<Communicator> group,
                         DType dtype = DType::F32);
  // indices: i64 ids in [0, num_embeddings), any shape -> (..., embedding_dim), the same on every rank.
  Variable forward(const Variable& indices) override;
  std::string type_name() const override { return "VocabParallelEmbedding"; }
  // Takes this rank's rows of the unpadded table [num_embeddings, embedding_dim].
  void load_full(const Tensor& weight);

  Variable weight;  // [padded_num_embeddings / tp, embedding_dim]
  const int64_t num_embeddings, embedding_dim, padded_num_embeddings;
  const ShardRange local;         // this rank's rows of the padded vocabulary
  const int64_t local_real_rows;  // how many of them are real (the rest are padding)

 private:
  std::shared_ptr<Communicator> group_;
};

}  // namespace fathom::parallel
