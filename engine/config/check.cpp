#include "engine/config/check.h"

#include <algorithm>

#include "engine/config/parse.h"

namespace fathom {
namespace {

// Removes the member at dotted `path`; false when there is none.
bool remove_path(ConfigNode& root, const std::string& path) {
  ConfigNode* node = &root;
  std::string rest = path;
  for (;;) {
    const size_t dot = rest.find('.');
    const std::string key = rest.substr(0, dot);
    auto it = std::find_if(node->members.begin(), node->members.end(),
                           [&](const ConfigMember& member) { return member.key == key; });
    if (it == node->members.end()) return false;
    if (dot == std::string::npos) {
      node->members.erase(it);
      return true;
    }
    node = &it->value;
    rest = rest.substr(dot + 1);
  }
}

// What to remove after an error at `path`: the key itself, or the whole section when the key is
// its "type" (the section's other keys are that type's, and a section without one would add a
// false "\"type\" is missing").
std::string removable(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot != std::string::npos && path.substr(dot + 1) == "type") return path.substr(0, dot);
  return path;
}

}  // namespace

ConfigCheck check_config_file(const std::string& path, int64_t world_size, const AutoValues& autos) {
  ConfigCheck check;
  ConfigNode tree;
  try {
    tree = read_config_file(path);
  } catch (const Error& e) {
    check.problems.push_back(e.message());  // unreadable: nothing more to check
    return check;
  }
  check.filled = fill_auto(tree, autos);
  // Each round either succeeds or removes the key its error names, so the rounds are bounded by
  // the keys in the file; a problem that names no key (or one that cannot be removed) ends the
  // check after it is reported.
  for (;;) {
    try {
      Config config = parse_config(tree, path);
      config.check_supported();
      config.resolve_batch(world_size);
      if (check.problems.empty()) check.config = std::move(config);
      return check;
    } catch (const ConfigError& e) {
      check.problems.push_back(e.message());
      if (e.where().path.empty() || !remove_path(tree, removable(e.where().path))) return check;
    } catch (const Error& e) {
      check.problems.push_back(e.message());
      return check;
    }
  }
}

}  // namespace fathom
