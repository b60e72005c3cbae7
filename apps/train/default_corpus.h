#pragma once
// The built-in training text of fathom-train: Fathom's own documentation and sources,
// concatenated at build time and embedded in the binary, so the main job needs no download
// and runs from any directory.

#include <string_view>

namespace fathom::apps {

std::string_view default_corpus();

}  // namespace fathom::apps
