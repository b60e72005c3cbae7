#include "engine/config_reader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <map>
#include <sstream>

#include "engine/config_error.h"

namespace fathom {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

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
    ConfigNode node;
    node.line = mark.line + 1;
    add(std::move(node), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto found = anchors_.find(anchor);
    if (found == anchors_.end()) fail(mark.line + 1, child_path(), "an alias refers to an unknown anchor");
    ConfigNode copy = found->second;
    add(std::move(copy), YAML::NullAnchor);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
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

  void open(ConfigNode::Kind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
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
};

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

ConfigNode read_config_tree(std::string_view text, ConfigFormat format, const std::string& source) {
  if (format == ConfigFormat::Auto) format = detect_config_format(text);
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
  if (!builder.has_root())
    throw_config_error({source, 0, ""}, "the config is empty; write an object such as {\"train_batch_size\": 8}");
  ConfigNode root = builder.take_root();
  if (!root.is_map())
    throw_config_error({source, root.line, ""},
                       "the config must be an object of key: value pairs, got " + describe_config_value(root));
  return root;
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
