#include "nn/placement.h"

#include <algorithm>

#include "core/error.h"

namespace fathom::nn {

ShardRange shard_range(int64_t size, int parts, int rank) {
  FATHOM_CHECK(parts >= 1 && rank >= 0 && rank < parts, "shard_range: rank ", rank, " of ", parts, " parts");
  const int64_t base = size / parts, extra = size % parts;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

Placement Placement::shard(int dim, int num_shards, int shard_index, int64_t full_size, int64_t stored_size,
                           int fused_parts) {
  FATHOM_CHECK(dim >= 0 && num_shards >= 1 && shard_index >= 0 && shard_index < num_shards && fused_parts >= 1,
               "Placement::shard: dim ", dim, ", shard ", shard_index, " of ", num_shards, ", ", fused_parts, " parts");
  if (stored_size == 0) stored_size = full_size;
  FATHOM_CHECK(
      full_size > 0 && stored_size >= full_size && full_size % fused_parts == 0 && stored_size % fused_parts == 0,
      "Placement::shard: a dimension of ", full_size, " (stored as ", stored_size, ") in ", fused_parts,
      " equal parts");
  Placement p;
  p.sharded_dim = dim;
  p.num_shards = num_shards;
  p.shard_index = shard_index;
  p.full_size = full_size;
  p.stored_size = stored_size;
  p.fused_parts = fused_parts;
  return p;
}

Placement Placement::of_rank(int index) const {
  FATHOM_CHECK(index >= 0 && index < num_shards, "Placement::of_rank: rank ", index, " of ", num_shards);
  Placement p = *this;
  p.shard_index = index;
  return p;
}

std::vector<ShardRun> shard_runs(const Placement& p) {
  if (!p.sharded()) return {};
  const int64_t real_part = p.full_size / p.fused_parts, stored_part = p.stored_size / p.fused_parts;
  const ShardRange mine = shard_range(stored_part, p.num_shards, p.shard_index);
  const int64_t real = std::clamp<int64_t>(real_part - mine.offset, 0, mine.length);
  std::vector<ShardRun> runs;
  if (real == 0) return runs;
  for (int part = 0; part < p.fused_parts; ++part)
    runs.push_back({part * mine.length, part * real_part + mine.offset, real});
  return runs;
}

int64_t shard_extent(const Placement& p) {
  return p.fused_parts * shard_range(p.stored_size / p.fused_parts, p.num_shards, p.shard_index).length;
}

namespace {
void check_dim(const Shape& shape, const Placement& p) {
  FATHOM_CHECK(p.sharded_dim < static_cast<int>(shape.size()), "placement: sharded dim ", p.sharded_dim,
               " of a tensor of shape ", shape_str(shape));
}
}  // namespace

Shape full_shape(const Shape& shard, const Placement& p) {
  if (!p.sharded()) return shard;
  check_dim(shard, p);
  Shape full = shard;
  full[p.sharded_dim] = p.full_size;
  return full;
}

Shape shard_shape(const Shape& full, const Placement& p) {
  if (!p.sharded()) return full;
  check_dim(full, p);
  Shape shard = full;
  shard[p.sharded_dim] = shard_extent(p);
  return shard;
}

Tensor shard_of(const Tensor& full, const Placement& p) {
  if (!p.sharded()) return full.clone();
  FATHOM_CHECK(full.size(p.sharded_dim) == p.full_size, "shard_of: a tensor of shape ", shape_str(full.sizes()),
               " has ", full.size(p.sharded_dim), " along dim ", p.sharded_dim, ", its placement says ", p.full_size);
  Tensor shard = Tensor::zeros(shard_shape(full.sizes(), p), full.dtype(), full.device());
  for (const ShardRun& run : shard_runs(p))
    shard.narrow(p.sharded_dim, run.local, run.length).copy_(full.narrow(p.sharded_dim, run.full, run.length));
  return shard;
}

void place_shard(const Tensor& shard, const Placement& p, const Tensor& full) {
  if (!p.sharded()) return void(full.copy_(shard));
  FATHOM_CHECK(shard.sizes() == shard_shape(full.sizes(), p), "place_shard: a shard of shape ",
               shape_str(shard.sizes()), " for a tensor of shape ", shape_str(full.sizes()), "; its placement says ",
               shape_str(shard_shape(full.sizes(), p)));
  for (const ShardRun& run : shard_runs(p))
    full.narrow(p.sharded_dim, run.full, run.length).copy_(shard.narrow(p.sharded_dim, run.local, run.length));
}

}  // namespace fathom::nn
