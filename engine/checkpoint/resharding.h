#pragma once
// Reading a checkpoint into a layout other than the one that saved it (docs/checkpoints.md):
// any data-parallel size and ZeRO stage (ranges of flat coordinates are read from whichever
// saved ranks' files hold them), and any tensor-parallel size (each parameter assembled whole
// from the saved partitions and this rank's shard cut from it). No conversion step.

#include <vector>

#include "engine/checkpoint/reader.h"
#include "nn/placement.h"
#include "zero/flat_state_view.h"

namespace fathom {

// The model is the checkpoint's: every parameter of this rank in it with the same unsplit shape
// and, when this rank holds the whole model (`whole_model`: no pipeline), the same parameters in
// the same order; otherwise an error naming the first difference.
void check_checkpoint_model(const CheckpointReader& saved, const std::vector<zero::FlatSlot>& slots,
                            const std::vector<nn::Placement>& placements, bool whole_model);

// Where this rank's parameters sit in the model-parallel grid.
struct PartitionOf {
  int pipeline_size = 1, pipeline_stage = 0, tensor_size = 1, tensor_rank = 0;
};

// Reads states into the flat coordinates of this rank's parameters (`slots`, split as
// `placements` say, in partition `at`). Saved at the same pipeline and tensor-parallel layout,
// this rank's partition is read as it lies; otherwise parameter by parameter through
// CheckpointReader::read_whole. The reader must outlive the result.
zero::FlatReader checkpoint_flat_reader(CheckpointReader& saved, const std::vector<zero::FlatSlot>& slots,
                                        const std::vector<nn::Placement>& placements, PartitionOf at);

}  // namespace fathom
