#include "parallel/vocab_parallel_embedding.h"

#include <algorithm>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/memory_stats.h"
#include "kernels/elementwise.h"
#include "kernels/reduction.h"

namespace fathom::parallel {

int64_t padded_vocab_size(int64_t vocab, int tensor_parallel_size) {
  const int64_t multiple = int64_t{128} * tensor_parallel_size;
  return (vocab + multiple - 1) / multiple * multiple;
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num, int64_t dim, std::shared_ptr<Communicator> group,
                                               DType dtype)
    : num_embeddings(num),
      embedding_dim(dim),
      padded_num_embeddings(group ? padded_vocab_size(num, group->size()) : 0),
      local(group ? shard_range(padded_num_embeddings, group->size(), group->rank()) : ShardRange{}),
      local_real_rows(std::clamp<int64_t>(num - local.offset, 0, local.length)),
      group_(std::move(group)) {
  FATHOM_CHECK(group_ != nullptr, "VocabParallelEmbedding: no tensor-parallel group");
  FATHOM_CHECK(num > 0 && dim > 0, "VocabParallelEmbedding: sizes must be positive, got ", num, " x ", dim);
  MemoryTagScope tag(MemoryTag::Parameters);
  weight = register_parameter("weight", Tensor::zeros({local.length, dim}, dtype));
  set_placement("weight", nn::Placement::shard(0, group_->size(), group_->rank(), num, padded_num_embeddings));
  Generator gen(0);  // as nn::Embedding draws its table
  const DType draw = dtype == DType::F64 ? DType::F64 : DType::F32;
  load_full(normal({num, dim}, gen, 0.0, 1.0, draw).to(dtype));
}

void VocabParallelEmbedding::load_full(const Tensor& full) {
  FATHOM_CHECK((full.sizes() == Shape{num_embeddings, embedding_dim}),
               "VocabParallelEmbedding.load_full: table of "
               "shape ",
               shape_str(full.sizes()), ", expected [", num_embeddings, ", ", embedding_dim,
               "] (the real rows, without the padding)");
  autograd::NoGradGuard no_grad;
  weight.data().copy_(nn::shard_of(full, placement("weight")));  // the padding rows zero
}

Variable VocabParallelEmbedding::forward(const Variable& indices) {
  const Tensor& ids = indices.data();
  FATHOM_CHECK(ids.dtype() == DType::I64, "VocabParallelEmbedding: ids must be i64, got ", dtype_name(ids.dtype()));
  if (ids.numel() > 0) {
    // Ids past the real vocabulary would read padding rows without an error: refuse them.
    const auto low = static_cast<int64_t>(fathom::min(ids).item()),
               high = static_cast<int64_t>(fathom::max(ids).item());
    FATHOM_CHECK(low >= 0 && high < num_embeddings, "VocabParallelEmbedding: ids range over [", low, ", ", high,
                 "] but the vocabulary has ", num_embeddings, " entries");
  }
  // 1 where the id is this rank's, else 0; the others look up row 0 and are zeroed.
  const Device device = ids.device();
  const Tensor start = Tensor::scalar(static_cast<double>(local.offset), DType::I64, device);
  const Tensor end = Tensor::scalar(static_cast<double>(local.offset + local.length), DType::I64, device);
  const Tensor mine = mul(ge(ids, start).to(DType::I64), lt(ids, end).to(DType::I64));
  const Tensor local_ids = mul(sub(ids, start), mine);
  const Variable rows = autograd::embedding(local_ids, weight);
  const Variable mask(mine.to(weight.data().dtype()).unsqueeze(-1));
  return reduce_from_tensor_region(autograd::mul(rows, mask), group_);
}

}  // namespace fathom::parallel
