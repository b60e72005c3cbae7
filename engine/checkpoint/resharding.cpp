#include "engine/checkpoint/resharding.h"

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "engine/checkpoint/layout.h"

namespace fathom {

namespace {

bool same_split(const nn::Placement& a, const nn::Placement& b) {
  if (a.sharded() != b.sharded()) return false;
  return !a.sharded() ||
         (a.sharded_dim == b.sharded_dim && a.num_shards == b.num_shards && a.shard_index == b.shard_index &&
          a.full_size == b.full_size && a.stored_size == b.stored_size && a.fused_parts == b.fused_parts);
}

// Whether the checkpoint's partition `at` is laid out as this rank's parameters are, so flat
// coordinates differ only by the partition's start.
bool same_partition(const CheckpointReader& saved, const std::vector<zero::FlatSlot>& slots,
                    const std::vector<nn::Placement>& placements, PartitionOf at) {
  if (saved.tensor_parallel_size() != at.tensor_size || saved.pipeline_parallel_size() != at.pipeline_size)
    return false;
  size_t i = 0;
  for (const SavedTensor& entry : saved.tensors()) {
    if (entry.tensor_rank != at.tensor_rank || entry.pipeline_stage != at.pipeline_stage) continue;
    if (i >= slots.size() || entry.shape != slots[i].shape || !same_split(entry.placement, placements[i])) return false;
    ++i;
  }
  return i == slots.size();
}

}  // namespace

void check_checkpoint_model(const CheckpointReader& saved, const std::vector<zero::FlatSlot>& slots,
                            const std::vector<nn::Placement>& placements, bool whole_model) {
  const size_t saved_count = saved.parameter_names().size();
  FATHOM_CHECK(!whole_model || saved_count == slots.size(), "checkpoint ", saved.index_path(), " holds ", saved_count,
               " tensors but the model has ", slots.size(), "; it was saved from another model");
  for (size_t s = 0; s < slots.size(); ++s) {
    // The parameter's first entry (tensor rank 0; a tied copy's first stage). Found by name:
    // a pipeline saves stage by stage, so the order is the stages' (interleaved: not the model's).
    const auto found = std::find_if(saved.tensors().begin(), saved.tensors().end(), [&](const SavedTensor& e) {
      return e.name == slots[s].name && e.tensor_rank == 0;
    });
    FATHOM_CHECK(found != saved.tensors().end(), "checkpoint ", saved.index_path(), " has no tensor \"",
                 slots[s].name, "\"; it was saved from another model");
    const Shape theirs = found->full_shape(), ours = nn::full_shape(slots[s].shape, placements.at(s));
    FATHOM_CHECK(theirs == ours, "checkpoint ", saved.index_path(), ": tensor ", s, " is \"", found->name, "\" ",
                 shape_str(theirs), " but the model's is \"", slots[s].name, "\" ", shape_str(ours),
                 "; it was saved from another model");
  }
}

zero::FlatReader checkpoint_flat_reader(CheckpointReader& saved, const std::vector<zero::FlatSlot>& slots,
                                        const std::vector<nn::Placement>& placements, PartitionOf at) {
  if (same_partition(saved, slots, placements, at)) {
    const int64_t start = partition_ranges(saved.tensors(), at.pipeline_size, at.tensor_size)
                              .at(at.pipeline_stage * at.tensor_size + at.tensor_rank)
                              .begin;
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
