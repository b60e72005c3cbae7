#pragma once
// What this process (one rank) holds, by purpose, from the allocator's tags — the numbers ZeRO
// is judged by. Exact byte counts of live allocations, host and device together.

#include <cstdint>
#include <string>

namespace fathom {

struct ModelStateBytes {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t master_weights = 0;    // fp32 copies of 16-bit parameters
  int64_t optimizer_states = 0;
  int64_t communication = 0;     // buckets and staging buffers of collectives
  int64_t model_states() const { return parameters + gradients + master_weights + optimizer_states; }
};

// Live bytes now (peak = false) or the peak of each tag since the last reset_peak (peak = true).
ModelStateBytes model_state_bytes(bool peak = false);
// "parameters 12.6 MiB | gradients 6.3 MiB | master weights 0 B | optimizer states 25.2 MiB |
//  communication 0 B | model states 44.1 MiB"
std::string format_model_state_bytes(const ModelStateBytes& bytes);
// memory_breakdown's line: "memory after <point> | parameters ... | gradients ... | master_weights
// ... | optimizer_state ... | activations ... | communication ... | other ... | total ... (host ...,
// host tier ..., pinned ..., cuda:0 ...)" — the live bytes of every allocator tag, host, offload's
// tiers and devices together, then the total of each allocator (the tiers when they hold any).
std::string format_memory_breakdown(const std::string& point);

}  // namespace fathom
