#include "parallel/sharded_tensor.h"

#include "core/error.h"

namespace fathom::parallel {

Tensor gather_shards(const Tensor& shard, const nn::Placement& placement, Communicator& group) {
  if (!placement.sharded()) return shard;
  FATHOM_CHECK(placement.num_shards == group.size() && placement.shard_index == group.rank(), "gather_shards: shard ",
               placement.shard_index, " of ", placement.num_shards, " on rank ", group.rank(), " of a group of ",
               group.size());
  const Shape full_shape = nn::full_shape(shard.sizes(), placement);
  std::vector<int64_t> counts;
  for (int r = 0; r < group.size(); ++r)
    counts.push_back(shape_numel(nn::shard_shape(full_shape, placement.of_rank(r))));
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  Tensor gathered = Tensor::empty({total}, shard.dtype(), shard.device());
  group.all_gather_v(shard.contiguous().view({-1}), gathered, counts);
  Tensor full = Tensor::zeros(full_shape, shard.dtype(), shard.device());
  int64_t offset = 0;
  for (int r = 0; r < group.size(); ++r) {
    const nn::Placement theirs = placement.of_rank(r);
    nn::place_shard(gathered.narrow(0, offset, counts[r]).view(nn::shard_shape(full_shape, theirs)), theirs, full);
    offset += counts[r];
  }
  return full;
}

}  // namespace fathom::parallel
