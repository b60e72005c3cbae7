#pragma once
// Checking a config file without training: every problem in it at once (reading stops at the
// first), then the config as it would run — batch sizes for a world size, every default filled
// in, each "auto" and what it became. fathom-config check prints it; fathom-train reads its
// --config through the same function, so a config that trains passes the check and vice versa.

#include <optional>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/config/auto_values.h"

namespace fathom {

struct ConfigCheck {
  std::vector<std::string> problems;  // each a config error message; empty: the config is good
  std::optional<Config> config;       // the resolved config when there are no problems
  std::vector<AutoFilled> filled;     // what each "auto" became
  bool ok() const { return problems.empty(); }
};

// Reads `path`, fills the "auto" values `autos` knows, parses, checks what this build supports
// and resolves the batch sizes for `world_size` data-parallel ranks. After a problem that names a
// key, the check goes on as if that key were absent, so one run reports them all.
ConfigCheck check_config_file(const std::string& path, int64_t world_size, const AutoValues& autos = {});

}  // namespace fathom
