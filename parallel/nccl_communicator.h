#pragma once
// The NCCL backend: device tensors, collectives enqueued on the communicator's own CUDA stream
// after the work already queued on the default stream (so inputs are ready), completion
// tracked by a CUDA event. libnccl.so.2 is loaded at run time (dlopen), so Fathom starts on
// machines without NCCL and reports its absence only when NCCL is asked for.
//
// Uneven (v) collectives, which NCCL lacks, are grouped per-rank ncclReduce / ncclBroadcast
// calls. f16/bf16 reductions are widened to f32 on the GPU, reduced in f32 and rounded once, as
// on MPI. Collectives issued inside a CollectiveGroup (parallel/communicator.h) are one NCCL
// group: enqueued together when it closes, with one completion event.

#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace fathom::parallel {

// True when this build has the NCCL backend and libnccl.so.2 can be loaded.
bool nccl_available();
// Why nccl_available() is false ("" when it is true).
std::string nccl_unavailable_reason();

// "2.28.3" from ncclGetVersion ("" when NCCL cannot be loaded).
std::string nccl_loaded_version();
// A one-rank NCCL communicator on `device` all-reduces a small buffer and checks the result:
// "" on success, otherwise what failed.
std::string nccl_self_test(int device);

// Collective over `bootstrap` (an MPI communicator): rank 0 creates the NCCL unique id and
// broadcasts it; every rank joins on GPU `device`. The NCCL communicator has the same ranks.
std::shared_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device, const std::string& name);

}  // namespace fathom::parallel
