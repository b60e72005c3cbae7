#include "engine/config/auto_values.h"

#include "engine/config/parse.h"

namespace fathom {
namespace {

void fill(ConfigNode& node, const std::string& path, const AutoValues& values, std::vector<AutoFilled>& filled) {
  if (node.is_scalar() && node.text == "auto") {
    const auto found = values.find(path);
    if (found == values.end()) return;  // stays "auto": the parser names the key
    const int line = node.line;
    // A config tree is an object at its root: read the value as one.
    node = read_config_tree("{\"value\": " + found->second.json + "}", ConfigFormat::Json, "\"auto\" at " + path)
               .members.front()
               .value;
    node.line = line;
    filled.push_back({path, found->second});
    return;
  }
  for (ConfigMember& member : node.members) fill(member.value, join_config_path(path, member.key), values, filled);
}

}  // namespace

std::vector<AutoFilled> fill_auto(ConfigNode& tree, const AutoValues& values) {
  std::vector<AutoFilled> filled;
  fill(tree, "", values, filled);
  return filled;
}

std::string AutoFilled::line() const { return path + " = " + value.json + " (" + value.from + ")"; }

Config config_from_file_with_auto(const std::string& path, const AutoValues& values, std::vector<AutoFilled>* filled) {
  ConfigNode root = read_config_file(path);
  std::vector<AutoFilled> replaced = fill_auto(root, values);
  if (filled) *filled = std::move(replaced);
  return parse_config(root, path);
}

}  // namespace fathom
