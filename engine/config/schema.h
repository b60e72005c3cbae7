#pragma once
// DeepSpeed's config keys that Fathom does not implement (yet), and the rule for each.
// DeepSpeed ignores keys it does not know; Fathom rejects them (a typo must not silently run
// with a default), so it needs the full list of what DeepSpeed *does* know: those keys are
// accepted while they are off or at DeepSpeed's default, and an error naming the key once
// they turn on a feature Fathom would otherwise silently skip.

#include <string>
#include <vector>

#include "engine/config/section.h"

namespace fathom {

// Every key DeepSpeed knows at the top level that Fathom does not read.
const std::vector<std::string>& deepspeed_only_config_keys();

// Checks each DeepSpeed-only key present in `root` (the whole config): its sub-keys must be
// DeepSpeed's (did-you-mean otherwise), and it must be off / at its default.
void check_deepspeed_only_keys(const ConfigSection& root);

}  // namespace fathom
