#pragma once
// FATHOM_COMM_DEBUG=1: before each collective, the ranks exchange what they are about to run
// (kind, reduction, dtype, size, root, sequence number) and a mismatch becomes an error naming
// both sides — instead of the hang, or silent garbage, that a mismatched collective causes.

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace fathom::parallel {

// Plain data, exchanged as bytes.
struct CollectiveSignature {
  int64_t sequence = 0;
  int64_t elements = 0;     // the size every rank must agree on (the total for v-variants)
  uint64_t counts_hash = 0; // v-variants: the per-rank counts, which all ranks must pass alike
  int32_t kind = 0, op = 0, dtype = 0, root = 0;
};

bool comm_debug_enabled();  // FATHOM_COMM_DEBUG set to anything but "" or "0"
CollectiveSignature signature_of(const Collective& collective);
// "" when every rank issued the same collective; otherwise an error message naming the
// communicator, the first rank that differs from rank 0, and both collectives.
std::string find_mismatch(const std::vector<CollectiveSignature>& by_rank, const std::string& communicator);

}  // namespace fathom::parallel
