#pragma once
// Which slots of which hosts run a rank: DeepSpeed's --include/--exclude filters, then
// --num_nodes and --num_procs.
//
// Filter syntax (as DeepSpeed's): hosts separated by '@'; `host` means all its slots and
// `host:0,2` slots 0 and 2. --include keeps only what it names; --exclude drops what it names.
// The two cannot be combined.

#include <optional>
#include <string>
#include <vector>

#include "launcher/hostfile.h"

namespace fathom::launcher {

struct HostSlots {
  std::string name;
  std::vector<int> slots;  // selected slot indices, ascending
  bool operator==(const HostSlots&) const = default;
};

struct SelectionOptions {
  std::string include;           // empty: every slot
  std::string exclude;           // empty: none
  std::optional<int> num_nodes;  // keep the first N hosts left by the filter
  std::optional<int> num_procs;  // keep the first N slots left on each host
};

// Hosts keep their hostfile order; hosts left with no slot are dropped. Throws naming the
// unknown host, the out-of-range slot, or the count that cannot be met.
std::vector<HostSlots> select_slots(const std::vector<Host>& hosts, const SelectionOptions& options);

}  // namespace fathom::launcher
