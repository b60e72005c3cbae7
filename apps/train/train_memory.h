#pragma once
// fathom-train refuses a model whose model states (weights, gradients, fp32 masters, optimizer
// states: zero/memory_estimate.h, what fathom-estimate-memory prints) cannot fit in this
// machine's memory, before any of it is allocated: `--n-layer 100000000` is an error with the
// estimate, not a process that grows until the kernel kills it.

#include "engine/config/config.h"
#include <cstdint>

namespace fathom::apps {

// `ranks_here`: the job's ranks on this machine, which share its memory; `data_size` the
// data-parallel ranks ZeRO shards over, each holding 1/tensor_parallel_size of the model. CPU
// training only (a GPU's memory is the allocator's to report); no check when states are offloaded
// to nvme.
void check_model_fits_in_memory(int64_t parameters, const Config& config, int data_size, int ranks_here,
                                int tensor_parallel_size = 1);

}  // namespace fathom::apps
