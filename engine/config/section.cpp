#include "engine/config/section.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <regex>
#include <sstream>

#include "core/did_you_mean.h"

namespace fathom {
namespace {

bool iequals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// YAML 1.2 core-schema numbers (what JSON allows, plus a leading '+' and "5." forms).
bool is_integer_literal(const std::string& text) {
  static const std::regex pattern("[-+]?[0-9]+");
  return std::regex_match(text, pattern);
}
bool is_float_literal(const std::string& text) {
  static const std::regex pattern("[-+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  return std::regex_match(text, pattern);
}

std::optional<int64_t> parse_integer(const ConfigNode& node) {
  if (!node.is_scalar() || node.quoted) return std::nullopt;
  if (is_integer_literal(node.text)) {
    const char* begin = node.text.data() + (node.text[0] == '+' ? 1 : 0);
    int64_t value = 0;
    const auto [end, error] = std::from_chars(begin, node.text.data() + node.text.size(), value);
    if (error == std::errc() && end == node.text.data() + node.text.size()) return value;
    return std::nullopt;  // out of int64 range
  }
  // An integral float: DeepSpeed's docs write bucket sizes as 5e8 (Python's int() accepts it).
  const std::optional<double> number = config_number(node);
  if (number && std::floor(*number) == *number && std::fabs(*number) < 9.2e18) return static_cast<int64_t>(*number);
  return std::nullopt;
}

std::string integer_range(int64_t min, int64_t max) {
  constexpr int64_t lowest = std::numeric_limits<int64_t>::min();
  constexpr int64_t highest = std::numeric_limits<int64_t>::max();
  if (min == lowest && max == highest) return "";
  if (max == highest) return " >= " + std::to_string(min);
  if (min == lowest) return " <= " + std::to_string(max);
  return " from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string number_range(double min, double max) {
  const bool low = std::isfinite(min), high = std::isfinite(max);
  if (!low && !high) return "";
  if (!high) return " >= " + format_number(min);
  if (!low) return " <= " + format_number(max);
  return " from " + format_number(min) + " to " + format_number(max);
}

}  // namespace

std::optional<double> config_number(const ConfigNode& node) {
  if (!node.is_scalar() || node.quoted) return std::nullopt;
  if (!is_integer_literal(node.text) && !is_float_literal(node.text)) return std::nullopt;
  const char* begin = node.text.data() + (node.text[0] == '+' ? 1 : 0);
  double value = 0;
  const auto [end, error] = std::from_chars(begin, node.text.data() + node.text.size(), value);
  if (error != std::errc() || end != node.text.data() + node.text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<bool> config_bool(const ConfigNode& node) {
  if (!node.is_scalar() || node.quoted) return std::nullopt;
  if (node.text == "true" || node.text == "True" || node.text == "TRUE") return true;
  if (node.text == "false" || node.text == "False" || node.text == "FALSE") return false;
  return std::nullopt;
}

void throw_config_type_error(const ConfigLocation& where, const ConfigNode& value, const std::string& expected) {
  if (value.is_scalar() && value.text == "auto")
    throw_config_error(where, "\"auto\" is a placeholder that a program fills in from its own settings (the "
                              "Hugging Face Trainer; fathom-train fills the usual ones), not the library; write " +
                                  expected);
  if (value.is_scalar() && value.quoted) {
    ConfigNode plain = value;
    plain.quoted = false;
    if (config_number(plain) || config_bool(plain))
      throw_config_error(where, "expected " + expected + ", got the string \"" + value.text + "\"; write " +
                                    value.text + " without quotes");
  }
  throw_config_error(where, "expected " + expected + ", got " + describe_config_value(value));
}

ConfigSection::ConfigSection(const ConfigNode* node, std::string path, std::string source)
    : node_(node && !node->is_null() ? node : nullptr), path_(std::move(path)), source_(std::move(source)) {
  if (node_ && !node_->is_map())
    throw_config_type_error({source_, node_->line, path_}, *node_, "an object of key: value pairs");
}

void ConfigSection::check_keys(const std::vector<std::string>& known) const {
  if (!node_) return;
  for (const ConfigMember& member : node_->members) {
    if (std::find(known.begin(), known.end(), member.key) != known.end()) continue;
    const std::string match = closest_match(member.key, known);
    std::string hint;
    if (!match.empty()) {
      hint = "; did you mean \"" + match + "\"?";
    } else if (known.size() <= 12) {
      for (const std::string& name : known) hint += (hint.empty() ? "; known keys: " : ", ") + name;
    } else {
      hint = "; docs/config.md lists the keys";
    }
    throw_config_error({source_, member.line, path_of(member.key)}, "unknown key" + hint);
  }
}

const ConfigNode* ConfigSection::find(const std::string& key) const {
  if (!node_) return nullptr;
  const ConfigNode* value = node_->find(key);
  return value && !value->is_null() ? value : nullptr;
}

int ConfigSection::line_of(const std::string& key) const {
  if (!node_) return 0;
  for (const ConfigMember& member : node_->members)
    if (member.key == key) return member.line;
  return 0;
}

void ConfigSection::fail(const std::string& key, const std::string& what) const { throw_config_error(where(key), what); }

std::optional<int64_t> ConfigSection::optional_integer(const std::string& key, int64_t min, int64_t max) const {
  const ConfigNode* value = find(key);
  if (!value) return std::nullopt;
  const std::string expected = "an integer" + integer_range(min, max);
  const std::optional<int64_t> parsed = parse_integer(*value);
  if (!parsed) throw_config_type_error(where(key), *value, expected);
  if (*parsed < min || *parsed > max) fail(key, "expected " + expected + ", got " + value->text);
  return parsed;
}

int64_t ConfigSection::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
  return optional_integer(key, min, max).value_or(fallback);
}

double ConfigSection::number(const std::string& key, double fallback, double min, double max) const {
  const ConfigNode* value = find(key);
  if (!value) return fallback;
  const std::string expected = "a number" + number_range(min, max);
  const std::optional<double> parsed = config_number(*value);
  if (!parsed) throw_config_type_error(where(key), *value, expected);
  if (*parsed < min || *parsed > max) fail(key, "expected " + expected + ", got " + value->text);
  return *parsed;
}

std::optional<bool> ConfigSection::optional_boolean(const std::string& key) const {
  const ConfigNode* value = find(key);
  if (!value) return std::nullopt;
  const std::optional<bool> parsed = config_bool(*value);
  if (!parsed) throw_config_type_error(where(key), *value, "true or false");
  return parsed;
}

bool ConfigSection::boolean(const std::string& key, bool fallback) const {
  return optional_boolean(key).value_or(fallback);
}

std::string ConfigSection::string(const std::string& key, const std::string& fallback) const {
  const ConfigNode* value = find(key);
  if (!value) return fallback;
  if (!value->is_scalar() || value->text == "auto") throw_config_type_error(where(key), *value, "a string");
  return value->text;
}

std::vector<std::string> ConfigSection::strings(const std::string& key) const {
  const ConfigNode* value = find(key);
  if (!value) return {};
  if (!value->is_sequence()) throw_config_type_error(where(key), *value, "a list of strings");
  std::vector<std::string> out;
  for (const ConfigNode& item : value->items) {
    if (!item.is_scalar() || item.text == "auto") throw_config_type_error(where(key), item, "a list of strings");
    out.push_back(item.text);
  }
  return out;
}

std::vector<int64_t> ConfigSection::integers(const std::string& key, int64_t min, int64_t max) const {
  const ConfigNode* value = find(key);
  if (!value) return {};
  const std::string expected = "a list of integers" + integer_range(min, max);
  if (!value->is_sequence()) throw_config_type_error(where(key), *value, expected);
  std::vector<int64_t> out;
  for (const ConfigNode& item : value->items) {
    const std::optional<double> parsed = config_number(item);
    if (!parsed || *parsed != static_cast<double>(static_cast<int64_t>(*parsed)))
      throw_config_type_error(where(key), item, expected);
    if (*parsed < static_cast<double>(min) || *parsed > static_cast<double>(max))
      fail(key, "expected " + expected + ", got " + item.text);
    out.push_back(static_cast<int64_t>(*parsed));
  }
  return out;
}

std::string ConfigSection::choice(const std::string& key, const std::string& fallback,
                                  const std::vector<std::string>& allowed) const {
  const ConfigNode* value = find(key);
  if (!value) return fallback;
  std::string expected;
  for (const std::string& name : allowed) expected += (expected.empty() ? "one of \"" : ", \"") + name + "\"";
  if (value->is_scalar())
    for (const std::string& name : allowed)
      if (iequals(value->text, name)) return name;
  if (!value->is_scalar() || value->text == "auto") throw_config_type_error(where(key), *value, expected);
  const std::string match = closest_match(value->text, allowed);
  fail(key, "expected " + expected + ", got " + describe_config_value(*value) +
                (match.empty() ? "" : "; did you mean \"" + match + "\"?"));
}

ConfigSection ConfigSection::section(const std::string& key) const {
  return ConfigSection(find(key), path_of(key), source_);
}

}  // namespace fathom
