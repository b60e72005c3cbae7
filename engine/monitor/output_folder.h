#pragma once
// The folder a config section writes its files into (monitors, profiles, traces).

#include <string>

namespace fathom {

// Creates `folder` and its parents ("" is the working directory: nothing to do), or throws
// "<section>: cannot create <folder> (<reason>); check <key>".
void create_output_folder(const std::string& folder, const std::string& section, const std::string& key);

}  // namespace fathom
