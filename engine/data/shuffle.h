#pragma once
// The order in which an epoch visits a dataset's samples: identity, or a seeded permutation
// that depends only on (seed, epoch) — never on the rank or the world size — so every rank
// computes the same order without communicating, and a resumed run recomputes it exactly.

#include <cstdint>
#include <vector>

namespace fathom {

// Philox stream offsets reserved for data shuffling (the top 16 bits spell 0xDA7A): epoch e
// draws from offset kShuffleStreamBase + e, so a loader seeded like the model's initialiser
// (which draws from small offsets 0, 1, 2, ...) does not reuse its random numbers.
inline constexpr uint64_t kShuffleStreamBase = 0xDA7AULL << 48;

// Position p of the result is the dataset index visited p-th. With shuffle, sample i gets the
// 64-bit Philox key (seed, kShuffleStreamBase + epoch, i) and samples are sorted by key (ties,
// vanishingly rare, by index): a uniform permutation that costs O(n log n) and is the same on
// every machine.
std::vector<int64_t> epoch_order(int64_t num_samples, bool shuffle, uint64_t seed, int64_t epoch);

}  // namespace fathom
