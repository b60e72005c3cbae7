#include "launcher/host_selection.h"

#include <algorithm>

#include "core/error.h"
#include "launcher/text_parsing.h"

namespace fathom::launcher {
namespace {

// chosen[host][slot]: whether that slot runs a rank.
using SlotMask = std::vector<std::vector<bool>>;

std::string host_names(const std::vector<Host>& hosts) {
  std::string names;
  for (const Host& host : hosts) {
    if (!names.empty()) names += ", ";
    names += host.name;
  }
  return names;
}

size_t host_index(const std::vector<Host>& hosts, std::string_view name, std::string_view flag) {
  const auto found = std::find_if(hosts.begin(), hosts.end(), [&](const Host& host) { return host.name == name; });
  FATHOM_CHECK(found != hosts.end(), flag, ": unknown host ", name, " (known hosts: ", host_names(hosts), ")");
  return static_cast<size_t>(found - hosts.begin());
}

// Sets every slot `filter` names to `value`.
void apply_filter(const std::vector<Host>& hosts, std::string_view filter, std::string_view flag, bool value,
                  SlotMask& chosen) {
  for (const std::string_view entry : split(filter, '@')) {
    const size_t colon = entry.find(':');
    const std::string_view name = entry.substr(0, colon);
    FATHOM_CHECK(!name.empty(), flag, " \"", filter, "\": empty host name; write host1:0,1@host2");
    const size_t host = host_index(hosts, name, flag);
    if (colon == std::string_view::npos) {
      std::fill(chosen[host].begin(), chosen[host].end(), value);
      continue;
    }
    for (const std::string_view slot_text : split(entry.substr(colon + 1), ',')) {
      const std::optional<int> slot = parse_non_negative_int(slot_text);
      FATHOM_CHECK(slot, flag, " \"", filter, "\": slot \"", slot_text, "\" of ", name,
                   " is not a slot index; write host:0,1");
      FATHOM_CHECK(*slot < hosts[host].slots, flag, ": slot ", *slot, " of ", name, " is out of range (", name,
                   " has ", count_of(hosts[host].slots, "slot"), ": 0-", hosts[host].slots - 1, ")");
      chosen[host][*slot] = value;
    }
  }
}

std::vector<HostSlots> chosen_slots(const std::vector<Host>& hosts, const SlotMask& chosen) {
  std::vector<HostSlots> selected;
  for (size_t host = 0; host < hosts.size(); ++host) {
    HostSlots entry{hosts[host].name, {}};
    for (int slot = 0; slot < hosts[host].slots; ++slot)
      if (chosen[host][slot]) entry.slots.push_back(slot);
    if (!entry.slots.empty()) selected.push_back(std::move(entry));
  }
  return selected;
}

}  // namespace

std::vector<HostSlots> select_slots(const std::vector<Host>& hosts, const SelectionOptions& options) {
  FATHOM_CHECK(options.include.empty() || options.exclude.empty(),
               "--include and --exclude cannot be combined; use one of them");
  const bool including = !options.include.empty();
  SlotMask chosen;
  for (const Host& host : hosts) chosen.emplace_back(host.slots, !including);
  if (including) apply_filter(hosts, options.include, "--include", true, chosen);
  if (!options.exclude.empty()) apply_filter(hosts, options.exclude, "--exclude", false, chosen);

  std::vector<HostSlots> selected = chosen_slots(hosts, chosen);
  FATHOM_CHECK(!selected.empty(), "--exclude \"", options.exclude, "\" leaves no slot to run on");
  const char* after_filter = including || !options.exclude.empty() ? " after --include/--exclude" : "";
  if (options.num_nodes) {
    FATHOM_CHECK(*options.num_nodes <= static_cast<int>(selected.size()), "--num_nodes ", *options.num_nodes,
                 ": only ", count_of(static_cast<int>(selected.size()), "host"), " available", after_filter);
    selected.resize(*options.num_nodes);
  }
  if (options.num_procs) {
    for (HostSlots& host : selected) {
      FATHOM_CHECK(*options.num_procs <= static_cast<int>(host.slots.size()), "--num_procs ", *options.num_procs,
                   ": host ", host.name, " has only ", count_of(static_cast<int>(host.slots.size()), "slot"), after_filter);
      host.slots.resize(*options.num_procs);
    }
  }
  return selected;
}

}  // namespace fathom::launcher
