#pragma once
// DeepSpeed's defaults for the "zero_optimization" sizes (v0.16), in elements: the one place
// they are written down. The config (engine/config/config.h) and the ZeRO option structs use them.

#include <cstdint>

namespace fathom::zero {

inline constexpr int64_t kDefaultReduceBucketElements = 500'000'000;     // reduce_bucket_size
inline constexpr int64_t kDefaultAllgatherBucketElements = 500'000'000;  // allgather_bucket_size
inline constexpr int64_t kDefaultPrefetchElements = 50'000'000;          // stage3_prefetch_bucket_size
inline constexpr int64_t kDefaultPersistenceThreshold = 100'000;         // stage3_param_persistence_threshold
inline constexpr int64_t kDefaultMaxLiveElements = 1'000'000'000;        // stage3_max_live_parameters
inline constexpr int64_t kDefaultMaxReuseDistance = 1'000'000'000;       // stage3_max_reuse_distance

}  // namespace fathom::zero
