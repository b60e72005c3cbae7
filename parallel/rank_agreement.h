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

}  // namespace fathom::parallel
