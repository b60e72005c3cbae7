#pragma once
// The tensor table of a checkpoint (docs/checkpoints.md, "Tensor parallelism"). A model-parallel
// job saves one flat space per pipeline stage and tensor-parallel rank — a *partition*: that
// rank's parameters (its shards, and the replicated tensors; a stage's own layers') concatenated
// in named order — and concatenates the partitions, stage after stage and tensor rank after
// tensor rank, into the checkpoint's flat coordinates. Each partition is sharded
// over the data ranks exactly as a data-parallel checkpoint is. The table names, per partition
// and parameter, where it lies and which part of the unsplit tensor it is (its placement), so a
// reader can assemble any parameter whole and cut any other layout's shard from it. A job
// without tensor or pipeline parallelism has one partition, and the table is the model's. A
// parameter two stages hold (a tied embedding) is in both stages' partitions, with equal values.

#include <string>
#include <vector>

#include "core/json.h"
#include "core/json_writer.h"
#include "nn/placement.h"
#include "parallel/communicator.h"
#include "zero/flat_state_view.h"

namespace fathom {

// One parameter as one tensor-parallel rank saved it.
struct SavedTensor {
  std::string name;
  Shape shape;              // as that rank held it (its shard)
  int64_t offset = 0;       // in the checkpoint's flat coordinates
  int tensor_rank = 0;      // its partition: this tensor-parallel rank's ...
  int pipeline_stage = 0;   // ... of this pipeline stage
  nn::Placement placement;  // replicated, or that rank's shard
  int64_t numel() const { return shape_numel(shape); }
  zero::Range range() const { return {offset, offset + numel()}; }
  Shape full_shape() const { return nn::full_shape(shape, placement); }
  int partition(int tensor_size) const { return pipeline_stage * tensor_size + tensor_rank; }
};

// The table of a job of `tensor_size` tensor-parallel ranks, from this rank's parameters and
// placements: every tensor-parallel rank holds the same parameters, in the shards its placement
// describes, so every partition follows from one.
std::vector<SavedTensor> partition_table(const std::vector<zero::FlatSlot>& slots,
                                         const std::vector<nn::Placement>& placements, int tensor_size);
// A pipeline's table: every stage's partition_table, stage after stage (collective over the
// pipeline group; each rank gets the whole table).
std::vector<SavedTensor> pipeline_table(parallel::Communicator& pipeline, const std::vector<SavedTensor>& stage_table);
// Each partition's range of flat coordinates, indexed by SavedTensor::partition.
std::vector<zero::Range> partition_ranges(const std::vector<SavedTensor>& table, int pipeline_size, int tensor_size);

// index.json's "tensors" and back. A checkpoint without tensor parallelism has no placement
// fields: every tensor is whole, in partition 0.
void write_tensor_table(JsonWriter& w, const std::vector<SavedTensor>& table, DType dtype);
std::vector<SavedTensor> read_tensor_table(const JsonValue& tensors, const std::string& index_path);

// What identifies the model across its tensor-parallel ranks: names, unsplit shapes and how each
// is split. Equal on every rank of a tensor-parallel group, or the ranks built different models.
std::string model_signature(const std::vector<zero::FlatSlot>& slots, const std::vector<nn::Placement>& placements);

}  // namespace fathom
