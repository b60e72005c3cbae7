#pragma once
// "auto": the Hugging Face Trainer's placeholder in a ds_config, filled from the program's own
// settings. The library has no settings to fill it from, so Config::from_file refuses "auto"
// and names the program that fills it; a program that has them (fathom-train) passes the
// values here, keyed by the key's path ("optimizer.params.lr"), and logs what each became.

#include <map>
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace fathom {

struct AutoValue {
  std::string json;  // the value, as JSON text: 2e-3, [0.9, 0.95], true
  std::string from;  // where it came from, for the log: "fathom-train's default", "--steps"
};
using AutoValues = std::map<std::string, AutoValue>;

// What one "auto" became.
struct AutoFilled {
  std::string path;
  AutoValue value;
  std::string line() const;  // "optimizer.params.lr = 0.002 (fathom-train's default)"
};

// Replaces every "auto" in `tree` whose path `values` has; returns what was replaced.
std::vector<AutoFilled> fill_auto(ConfigNode& tree, const AutoValues& values);

// Reads the config file like Config::from_file, with every "auto" whose path `values` has
// replaced first; `filled` lists them in document order. An "auto" at another path stays and
// is refused by the parser, naming the key.
Config config_from_file_with_auto(const std::string& path, const AutoValues& values, std::vector<AutoFilled>* filled);

}  // namespace fathom
