#include "engine/config/reader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <map>
#include <optional>
#include <sstream>

#include "core/json.h"
#include "engine/config/error.h"

namespace fathom {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

constexpr size_t kMaxConfigValues = 100000;
constexpr size_t kMaxConfigDepth = 64;

// Builds a ConfigNode tree from yaml-cpp's parse events. The event API (not YAML::Node) is
// used because it reports every key of a map, so a repeated key can be an error (YAML::Node
// keeps the first and hides the rest), and because it says which scalars were quoted.
class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(const std::string& source) : source_(source) {}

  bool has_root() const { return has_root_; }
  ConfigNode take_root() { return std::move(root_); }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    count(mark, 1);
    ConfigNode node;
    node.line = mark.line + 1;
    add(std::move(node), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto found = anchors_.find(anchor);
    if (found == anchors_.end()) fail(mark.line + 1, child_path(), "an alias refers to an unknown anchor");
    count(mark, node_count(found->second));  // before the copy: a nest of aliases grows exponentially
    ConfigNode copy = found->second;
    add(std::move(copy), YAML::NullAnchor);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    count(mark, 1);
    ConfigNode node;
    node.kind = ConfigNode::Kind::Scalar;
    node.text = value;
    // yaml-cpp tags plain scalars "?" and quoted ones "!"; an explicit tag (!!str) also makes
    // the value something other than a plain number or bool.
    node.quoted = !(tag.empty() || tag == "?");
    node.line = mark.line + 1;
    add(std::move(node), anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(ConfigNode::Kind::Sequence, mark, anchor);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(ConfigNode::Kind::Map, mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    ConfigNode node;
    std::string path;
    YAML::anchor_t anchor = YAML::NullAnchor;
    bool want_key = true;  // maps alternate key, value
    std::string key;
    int key_line = 0;
  };

  [[noreturn]] void fail(int line, const std::string& path, const std::string& what) const {
    throw_config_error({source_, line, path}, what);
  }

  // The path of the value that comes next.
  std::string child_path() const {
    if (stack_.empty()) return "";
    const Frame& top = stack_.back();
    if (top.node.is_sequence()) return top.path + "[" + std::to_string(top.node.items.size()) + "]";
    return top.want_key ? top.path : join_config_path(top.path, top.key);
  }

  // The bounds that keep a small hostile file small: a YAML alias bomb (anchors of lists of
  // aliases of anchors...) or a deep nest would otherwise take all memory or stack.
  void count(const YAML::Mark& mark, size_t nodes) {
    nodes_ += nodes;
    if (nodes_ > kMaxConfigValues)
      fail(mark.line + 1, child_path(),
           "the config expands to more than " + std::to_string(kMaxConfigValues) +
               " values (YAML aliases multiply what they refer to); a DeepSpeed config has a few hundred");
  }

  static size_t node_count(const ConfigNode& node) {
    size_t n = 1;
    for (const ConfigNode& item : node.items) n += node_count(item);
    for (const ConfigMember& member : node.members) n += 1 + node_count(member.value);
    return n;
  }

  void open(ConfigNode::Kind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
    count(mark, 1);
    if (stack_.size() >= kMaxConfigDepth)
      fail(mark.line + 1, child_path(),
           "lists and objects nested deeper than " + std::to_string(kMaxConfigDepth) + " levels; a config needs a few");
    if (!stack_.empty() && stack_.back().node.is_map() && stack_.back().want_key)
      fail(mark.line + 1, stack_.back().path, "a key must be a string, got a list or an object");
    Frame frame;
    frame.node.kind = kind;
    frame.node.line = mark.line + 1;
    frame.path = child_path();
    frame.anchor = anchor;
    stack_.push_back(std::move(frame));
  }

  void close() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    add(std::move(frame.node), frame.anchor);
  }

  void add(ConfigNode node, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) anchors_[anchor] = node;
    if (stack_.empty()) {
      root_ = std::move(node);
      has_root_ = true;
      return;
    }
    Frame& top = stack_.back();
    if (top.node.is_sequence()) {
      top.node.items.push_back(std::move(node));
      return;
    }
    if (top.want_key) {
      if (!node.is_scalar()) fail(node.line, top.path, "a key must be a string, got " + describe_config_value(node));
      top.key = node.text;
      top.key_line = node.line;
      top.want_key = false;
      return;
    }
    for (const ConfigMember& member : top.node.members)
      if (member.key == top.key)
        fail(top.key_line, join_config_path(top.path, top.key),
             "duplicate key (first given at line " + std::to_string(member.line) +
                 "); a key may appear only once in an object (DeepSpeed rejects duplicates too)");
    top.node.members.push_back({top.key, top.key_line, std::move(node)});
    top.want_key = true;
  }

  std::string source_;
  std::vector<Frame> stack_;
  ConfigNode root_;
  bool has_root_ = false;
  std::map<YAML::anchor_t, ConfigNode> anchors_;
  size_t nodes_ = 0;
};

// --- JSON: Fathom's own strict parser (core/json.h), which reports where a syntax error is, has
// no aliases to expand and bounds the nesting; the tree is then the one YAML builds.

struct TextPosition {
  int line = 1, column = 1;
};

TextPosition position_of(std::string_view text, size_t offset) {
  TextPosition at;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') ++at.line, at.column = 1;
    else ++at.column;
  }
  return at;
}

// hjson, which DeepSpeed reads its configs with, accepts a comma after the last member or
// element; so does Fathom: such a comma is blanked before the strict parse.
void blank_trailing_commas(std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (text[i] == ',') {
      size_t next = i + 1;
      while (next < text.size() && is_space(text[next])) ++next;
      if (next < text.size() && (text[next] == '}' || text[next] == ']')) text[i] = ' ';
    }
  }
}

ConfigNode config_node_of(const JsonValue& value, std::string_view text) {
  ConfigNode node;
  node.line = position_of(text, value.offset()).line;
  switch (value.kind()) {
    case JsonKind::Null: break;
    case JsonKind::Bool:
      node.kind = ConfigNode::Kind::Scalar;
      node.text = value.as_bool() ? "true" : "false";
      break;
    case JsonKind::Number:
      node.kind = ConfigNode::Kind::Scalar;
      node.text = value.number_text();
      break;
    case JsonKind::String:
      node.kind = ConfigNode::Kind::Scalar;
      node.text = value.as_string();
      node.quoted = true;
      break;
    case JsonKind::Array:
      node.kind = ConfigNode::Kind::Sequence;
      for (const JsonValue& item : value.as_array()) node.items.push_back(config_node_of(item, text));
      break;
    case JsonKind::Object:
      node.kind = ConfigNode::Kind::Map;
      for (const auto& [key, member] : value.as_object()) {
        ConfigNode child = config_node_of(member, text);
        node.members.push_back({key, child.line, std::move(child)});
      }
      break;
  }
  return node;
}

[[noreturn]] void throw_empty_config(const std::string& source) {
  throw_config_error({source, 0, ""}, "the config is empty; write an object such as {\"train_batch_size\": 8}");
}

// nullopt for a duplicate key: the YAML reader (which reads JSON too) reports it with the key's
// path and the line it was first given on, which the strict parser does not track.
std::optional<ConfigNode> read_json_config(std::string_view text, const std::string& source) {
  std::string clean = strip_json_comments(text, source);
  if (clean.find_first_not_of(" \t\r\n") == std::string::npos) throw_empty_config(source);
  blank_trailing_commas(clean);
  try {
    return config_node_of(parse_json(clean, source.empty() ? "the config" : source), clean);
  } catch (const JsonSyntaxError& e) {
    std::string reason = e.reason();
    if (reason.starts_with("duplicate key")) return std::nullopt;
    if (reason.find("after the end of the JSON value") != std::string::npos) reason += "; a config is one JSON object";
    const TextPosition at = position_of(clean, e.offset());
    throw_config_error({source, at.line, ""}, "invalid JSON: " + reason + " (column " + std::to_string(at.column) + ")");
  }
}

// A NUL byte is never part of a config (a binary file, or a truncated write): named with its place.
void reject_nul_bytes(std::string_view text, const std::string& source) {
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return;
  const TextPosition at = position_of(text, nul);
  throw_config_error({source, at.line, ""}, "a NUL byte (0x00) at column " + std::to_string(at.column) +
                                                "; a config is text: is this the right file?");
}

}  // namespace

const ConfigNode* ConfigNode::find(std::string_view key) const {
  for (const ConfigMember& member : members)
    if (member.key == key) return &member.value;
  return nullptr;
}

ConfigFormat detect_config_format(std::string_view text) {
  size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 byte order mark
  while (i < text.size()) {
    if (is_space(text[i])) {
      ++i;
    } else if (text[i] == '#' || text.substr(i, 2) == "//") {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.substr(i, 2) == "/*") {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 2;
    } else {
      break;
    }
  }
  return i < text.size() && text[i] == '{' ? ConfigFormat::Json : ConfigFormat::Yaml;
}

std::string strip_json_comments(std::string_view text, const std::string& source) {
  std::string out(text);
  const size_t n = out.size();
  size_t i = 0;
  int line = 1;
  auto blank = [&](size_t at) {
    if (out[at] == '\n') ++line;
    else out[at] = ' ';
  };
  while (i < n) {
    const char c = out[i];
    const char next = i + 1 < n ? out[i + 1] : '\0';
    if (c == '"' || c == '\'') {
      // Skip the string (an unclosed one ends at the line's end; the parser reports it).
      ++i;
      while (i < n && out[i] != c && out[i] != '\n') i += (c == '"' && out[i] == '\\' && i + 1 < n) ? 2 : 1;
      if (i < n && out[i] == c) ++i;
    } else if (c == '#' || (c == '/' && next == '/')) {
      while (i < n && out[i] != '\n') blank(i++);
    } else if (c == '/' && next == '*') {
      const int start_line = line;
      const size_t end = out.find("*/", i + 2);
      if (end == std::string::npos)
        throw_config_error({source, start_line, ""}, "a /* comment is never closed; end it with */");
      while (i < end + 2) blank(i++);
    } else {
      if (c == '\n') ++line;
      ++i;
    }
  }
  return out;
}

namespace {

ConfigNode checked_root(ConfigNode root, bool has_root, const std::string& source) {
  if (!has_root) throw_empty_config(source);
  if (!root.is_map())
    throw_config_error({source, root.line, ""},
                       "the config must be an object of key: value pairs, got " + describe_config_value(root));
  return root;
}

}  // namespace

ConfigNode read_config_tree(std::string_view text, ConfigFormat format, const std::string& source) {
  reject_nul_bytes(text, source);
  if (format == ConfigFormat::Auto) format = detect_config_format(text);
  // A .json whose text does not open with '{' is hjson's brace-less form, which YAML reads.
  const bool braced = detect_config_format(text) == ConfigFormat::Json;
  if (format == ConfigFormat::Json && braced)
    if (std::optional<ConfigNode> root = read_json_config(text, source)) return checked_root(std::move(*root), true, source);
  std::istringstream in(format == ConfigFormat::Json ? strip_json_comments(text, source) : std::string(text));
  TreeBuilder builder(source);
  try {
    YAML::Parser parser(in);
    parser.HandleNextDocument(builder);
    if (builder.has_root()) {
      TreeBuilder rest(source);
      if (parser.HandleNextDocument(rest))
        throw_config_error({source, 0, ""}, "the text holds more than one YAML document; a config is one document");
    }
  } catch (const YAML::Exception& e) {
    const char* syntax = format == ConfigFormat::Json ? "invalid JSON: " : "invalid YAML: ";
    throw_config_error({source, e.mark.is_null() ? 0 : e.mark.line + 1, ""},
                       syntax + e.msg + (e.mark.is_null() ? "" : " (column " + std::to_string(e.mark.column + 1) + ")"));
  }
  return checked_root(builder.take_root(), builder.has_root(), source);
}

std::string describe_config_value(const ConfigNode& node) {
  switch (node.kind) {
    case ConfigNode::Kind::Null: return "null";
    case ConfigNode::Kind::Scalar: return node.quoted ? "\"" + node.text + "\"" : node.text;
    case ConfigNode::Kind::Sequence: return "a list";
    case ConfigNode::Kind::Map: return "an object";
  }
  return "";
}

}  // namespace fathom
