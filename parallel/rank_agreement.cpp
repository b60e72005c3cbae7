#include "parallel/rank_agreement.h"

#include "core/error.h"
#include "core/xxhash64.h"
#include "parallel/collective_signature.h"

namespace fathom::parallel {

bool same_on_every_rank(Communicator& group, uint64_t hash) {
  if (group.size() == 1) return true;
  Tensor high = Tensor::from_vector<int64_t>({static_cast<int64_t>(hash)});
  Tensor low = high.clone();
  group.all_reduce(high, ReduceOp::Max);
  group.all_reduce(low, ReduceOp::Min);
  return high.data<int64_t>()[0] == low.data<int64_t>()[0];
}

bool same_on_every_rank(Communicator& group, const std::string& text) {
  return same_on_every_rank(group, xxhash64(text.data(), text.size()));
}

bool same_on_every_rank(Communicator& group, const Tensor& tensor) {
  if (group.size() == 1) return true;
  const Tensor bytes = tensor.device().is_cpu() ? tensor.contiguous() : tensor.to(kCPU);
  return same_on_every_rank(group, xxhash64(bytes.raw_data(), bytes.nbytes()));
}

void check_same_batch(Communicator& tensor_group, const Tensor& input, const Tensor& sample_index) {
  if (tensor_group.size() == 1 || !comm_debug_enabled()) return;
  FATHOM_CHECK(same_on_every_rank(tensor_group, input) &&
                   (!sample_index.defined() || same_on_every_rank(tensor_group, sample_index)),
               "engine forward (FATHOM_COMM_DEBUG): the ranks of this tensor-parallel group were given different "
               "batches; every rank of a tensor-parallel group must feed the same samples "
               "(the data loader of fathom::initialize does: it splits the batch over the data-parallel ranks only)");
}

}  // namespace fathom::parallel
