#pragma once
// Whether every rank of a group holds the same value (by a 64-bit hash): the cheap check behind
// checkpoint tag validation, the tensor-parallel ranks' model agreement and, in debug mode, their
// batch agreement. Collective: one all-reduce of the hash's largest and one of its smallest value.

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "parallel/communicator.h"

namespace fathom::parallel {

bool same_on_every_rank(Communicator& group, uint64_t hash);
bool same_on_every_rank(Communicator& group, const std::string& text);
// The tensor's bytes (copied to the host first when it lives on a device).
bool same_on_every_rank(Communicator& group, const Tensor& tensor);

// Debug mode (FATHOM_COMM_DEBUG=1; otherwise nothing): every rank of a tensor-parallel group
// must feed the same batch (DeepSpeed checks "data consistency within the TP group"); another
// batch would silently train another function. An error on every rank when one differs.
void check_same_batch(Communicator& tensor_group, const Tensor& input, const Tensor& sample_index);

}  // namespace fathom::parallel
