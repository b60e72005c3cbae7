#include "nn/embedding.h"

#include "autograd/nn_functions.h"
#include "nn/init.h"

namespace fathom::nn {

Embedding::Embedding(int64_t num, int64_t dim, DType dtype) : num_embeddings(num), embedding_dim(dim) {
  FATHOM_CHECK(num > 0 && dim > 0, "Embedding: sizes must be positive, got ", num, " x ", dim);
  MemoryTagScope tag(MemoryTag::Parameters);
  weight = register_parameter("weight", Tensor::empty({num, dim}, dtype));
  Generator gen(0);
  init::normal_(weight, gen, 0.0, 1.0);  // PyTorch's default; models usually re-initialise
}

Variable Embedding::forward(const Variable& indices) { return autograd::embedding(indices.data(), weight); }

}  // namespace fathom::nn
