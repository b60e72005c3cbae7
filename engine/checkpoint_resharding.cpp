#include "engine/checkpoint_resharding.h"

#include <memory>

#include "core/error.h"
#include "engine/checkpoint_layout.h"

namespace fathom {

namespace {

bool same_split(const nn::Placement& a, const nn::Placement& b) {
  if (a.sharded() != b.sharded()) return false;
  return !a.sharded() ||
         (a.sharded_dim == b.sharded_dim && a.num_shards == b.num_shards && a.shard_index == b.shard_index &&
          a.full_size == b.full_size && a.stored_size == b.stored_size && a.fused_parts == b.fused_parts);
}

// Whether partition `tensor_rank` of the checkpoint is laid out as this rank's parameters are,
// so flat coordinates differ only by the partition's start.
bool same_partition(const CheckpointReader& saved, const std::vector<zero::FlatSlot>& slots,
                    const std::vector<nn::Placement>& placements, int tensor_size, int tensor_rank) {
  if (saved.tensor_parallel_size() != tensor_size) return false;
  size_t i = 0;
  for (const SavedTensor& entry : saved.tensors()) {
    if (entry.tensor_rank != tensor_rank) continue;
    if (i >= slots.size() || entry.shape != slots[i].shape || !same_split(entry.placement, placements[i])) return false;
    ++i;
  }
  return i == slots.size();
}

}  // namespace

void check_checkpoint_model(const CheckpointReader& saved, const std::vector<zero::FlatSlot>& slots,
                            const std::vector<nn::Placement>& placements) {
  std::vector<const SavedTensor*> whole;  // partition 0's entry of each parameter
  for (const SavedTensor& entry : saved.tensors())
    if (entry.tensor_rank == 0) whole.push_back(&entry);
  FATHOM_CHECK(whole.size() == slots.size(), "checkpoint ", saved.index_path(), " holds ", whole.size(),
               " tensors but the model has ", slots.size(), "; it was saved from another model");
  for (size_t s = 0; s < slots.size(); ++s) {
    const Shape theirs = whole[s]->full_shape(), ours = nn::full_shape(slots[s].shape, placements.at(s));
    FATHOM_CHECK(whole[s]->name == slots[s].name && theirs == ours, "checkpoint ", saved.index_path(), ": tensor ", s,
                 " is \"", whole[s]->name, "\" ", shape_str(theirs), " but the model's is \"", slots[s].name, "\" ",
                 shape_str(ours), "; it was saved from another model");
  }
}

zero::FlatReader checkpoint_flat_reader(CheckpointReader& saved, const std::vector<zero::FlatSlot>& slots,
                                        const std::vector<nn::Placement>& placements, int tensor_size,
                                        int tensor_rank) {
  if (same_partition(saved, slots, placements, tensor_size, tensor_rank)) {
    const int64_t start = partition_ranges(saved.tensors(), tensor_size).at(tensor_rank).begin;
    return [&saved, start](const std::string& state, const Tensor& target, zero::Range covers) {
      saved.read(state, target, {covers.begin + start, covers.end + start});
    };
  }
  // Parameter by parameter; a parameter split over several requested ranges (ZeRO's shards)
  // is assembled once.
  struct Cached {
    std::string state;
    size_t slot = 0;
    Tensor shard;
  };
  auto cached = std::make_shared<Cached>();
  return [&saved, slots, placements, cached](const std::string& state, const Tensor& target, zero::Range covers) {
    for (size_t s = 0; s < slots.size(); ++s) {
      const zero::Range range = slots[s].range();
      if (std::max(range.begin, covers.begin) >= std::min(range.end, covers.end)) continue;
      if (!cached->shard.defined() || cached->state != state || cached->slot != s) {
        const Tensor whole = saved.read_whole(state, slots[s].name, target.dtype());
        *cached = {state, s, nn::shard_of(whole, placements[s])};
      }
      copy_flat_overlap(cached->shard.view({-1}), range, target, covers);
    }
  };
}

}  // namespace fathom
