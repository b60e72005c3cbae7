#pragma once
// Typed reading of one object of a parsed config (the top level, "fp16", "zero_optimization", ...).
// Every getter knows the key's path and line, so each error names them, the value given and
// what is allowed. The rules are DeepSpeed's, made strict where DeepSpeed is silent:
//  - a key not in the section's list is an error with a did-you-mean;
//  - an integer accepts an integral float (5e8, as DeepSpeed's docs write bucket sizes), not 5.5;
//  - a quoted number or bool ("8", "true") is a type error, never converted;
//  - "auto" (HF Trainer's placeholder) is rejected with an explanation;
//  - null, or an absent key, means the default.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/config/error.h"
#include "engine/config/reader.h"

namespace fathom {

class ConfigSection {
 public:
  // `node` may be nullptr or null (the section is absent: every getter returns its default);
  // anything else but an object is a type error at `path`.
  ConfigSection(const ConfigNode* node, std::string path, std::string source);

  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  bool present() const { return node_ != nullptr; }
  const ConfigNode* node() const { return node_; }

  // Throws for the first member whose key is not in `known` (did-you-mean among `known`).
  void check_keys(const std::vector<std::string>& known) const;

  // The member's value; nullptr when absent or null.
  const ConfigNode* find(const std::string& key) const;
  int line_of(const std::string& key) const;  // the key's line (0 when absent)
  std::string path_of(const std::string& key) const { return join_config_path(path_, key); }
  ConfigLocation where(const std::string& key) const { return {source_, line_of(key), path_of(key)}; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

  int64_t integer(const std::string& key, int64_t fallback, int64_t min,
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  std::optional<int64_t> optional_integer(const std::string& key, int64_t min,
                                          int64_t max = std::numeric_limits<int64_t>::max()) const;
  double number(const std::string& key, double fallback, double min,
                double max = std::numeric_limits<double>::infinity()) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::optional<bool> optional_boolean(const std::string& key) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  // A string from a fixed set (compared ignoring case, returned as spelled in `allowed`).
  std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed) const;
  ConfigSection section(const std::string& key) const;
  // A list of strings / of integers in [min, max] (absent or null: empty).
  std::vector<std::string> strings(const std::string& key) const;
  std::vector<int64_t> integers(const std::string& key, int64_t min,
                                int64_t max = std::numeric_limits<int64_t>::max()) const;

 private:
  const ConfigNode* node_;
  std::string path_;
  std::string source_;
};

// Scalar conversions shared with the optimizer/scheduler params (which have no fixed key list).
// Each returns nullopt when the node is not of that kind; `quoted` scalars never convert.
std::optional<double> config_number(const ConfigNode& node);
std::optional<bool> config_bool(const ConfigNode& node);
// The standard errors for a value of the wrong kind: "auto", a quoted number, anything else.
[[noreturn]] void throw_config_type_error(const ConfigLocation& where, const ConfigNode& value, const std::string& expected);

}  // namespace fathom
