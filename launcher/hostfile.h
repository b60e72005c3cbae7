#pragma once
// DeepSpeed's hostfile: one host per line, `hostname slots=N`; `#` starts a comment (whole
// line or trailing); blank lines are ignored. Slots are usually GPUs: a host's slot indices
// 0..N-1 become its CUDA_VISIBLE_DEVICES.

#include <string>
#include <string_view>
#include <vector>

namespace fathom::launcher {

struct Host {
  std::string name;
  int slots = 0;
  bool operator==(const Host&) const = default;
};

// Parses hostfile text; `source` names the file in errors, which read
// `hostfile <source>:<line>: "<line>": <problem>`. Throws on a malformed line, slots that are
// not a positive integer, a host listed twice, or no hosts at all.
std::vector<Host> parse_hostfile(std::string_view text, std::string_view source);
// Reads and parses the file at `path` (errors name `path` as given).
std::vector<Host> read_hostfile(const std::string& path);

}  // namespace fathom::launcher
