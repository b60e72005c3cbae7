#pragma once
// fathom-train's validation loss, the same number at every layout: the first
// min(validation set, --eval-batches x train_batch_size) samples, split over the data-parallel
// ranks (sample i on rank i mod dp), evaluated in micro-batches of the training micro-batch size,
// and averaged over all of them (an all-reduce over the data-parallel group). Tensor-parallel
// ranks and pipeline stages of one replica evaluate the same samples together.

#include <cstdint>

#include "engine/data/dataset.h"
#include "apps/train/train_model.h"
#include "parallel/communicator.h"

namespace fathom::apps {

// Without a graph; NaN when there are no samples. Collective over the job.
double validation_loss(const TrainModel& model, const Dataset& val, int64_t samples, int64_t micro_batch,
                       parallel::Communicator& data_group);

}  // namespace fathom::apps
