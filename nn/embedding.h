#pragma once
// A lookup table: rows of `weight` [num_embeddings, embedding_dim] selected by i64 indices.

#include "nn/module.h"

namespace fathom::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype = DType::F32);
  // indices: an i64 (or i32) Variable of any shape -> (..., embedding_dim).
  Variable forward(const Variable& indices) override;
  std::string type_name() const override { return "Embedding"; }

  Variable weight;
  const int64_t num_embeddings, embedding_dim;
};

}  // namespace fathom::nn
