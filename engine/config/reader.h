#pragma once
// Config text -> tree. DeepSpeed reads its config with hjson, so a ds_config.json may carry
// comments and trailing commas; Fathom reads JSON with its own strict parser (core/json.h) after
// blanking both, so a syntax error is reported at its line and column, and YAML with yaml-cpp,
// adding what yaml-cpp lacks: duplicate-key errors, bounds on size and depth (a YAML alias bomb
// is refused, not expanded) and a record of which scalars were quoted (a quoted "8" is a string,
// never a number). yaml-cpp stays out of this header.

#include <string>
#include <string_view>
#include <vector>

namespace fathom {

enum class ConfigFormat { Auto, Json, Yaml };

struct ConfigMember;

// One value of a parsed config, with the line it starts on.
struct ConfigNode {
  enum class Kind { Null, Scalar, Sequence, Map };

  Kind kind = Kind::Null;
  std::string text;    // a scalar as written, without quotes or escapes
  bool quoted = false;  // quoted scalars are strings; plain ones may be numbers or bools
  int line = 0;         // 1-based
  std::vector<ConfigNode> items;      // Sequence, in order
  std::vector<ConfigMember> members;  // Map, in document order; keys are unique

  bool is_null() const { return kind == Kind::Null; }
  bool is_scalar() const { return kind == Kind::Scalar; }
  bool is_sequence() const { return kind == Kind::Sequence; }
  bool is_map() const { return kind == Kind::Map; }
  // The member's value, or nullptr when the key is absent.
  const ConfigNode* find(std::string_view key) const;
};

struct ConfigMember {
  std::string key;
  int line = 0;  // the key's line
  ConfigNode value;
};

// Json when the first character that is not whitespace or a comment is '{', else Yaml.
ConfigFormat detect_config_format(std::string_view text);

// Blanks out '#', '//' and '/* */' comments outside quoted strings, keeping every newline so
// line numbers still match the file. `source` names the text in the error for an unclosed /*.
std::string strip_json_comments(std::string_view text, const std::string& source = "");

// Parses one JSON or YAML document. Syntax errors, duplicate keys, non-string keys and a second
// document are errors ("<source>:<line>: config error..."). Auto picks the format with
// detect_config_format; Json strips comments first (YAML has '#' comments of its own, and a
// YAML scalar such as s3://bucket must keep its "//").
ConfigNode read_config_tree(std::string_view text, ConfigFormat format, const std::string& source);

// The node as a message shows it: 8, true, null, "a string", a list, an object.
std::string describe_config_value(const ConfigNode& node);

}  // namespace fathom
