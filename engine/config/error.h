#pragma once
// How a config error reads. Every message starts "config error" (the CLI prefixes "fathom: ") and,
// when the text came from a file, with "<file>:<line>: " so an editor can jump to it:
//   ds_config.json:7: config error at optimizer.params.lr: expected a number, got "fast"
//   config error: train_batch_size (32) != ... = 64          (not tied to one key)

#include <string>

#include "core/error.h"

namespace fathom {

// Where in the config an error points: the file (empty for a string), the 1-based line (0 when
// unknown) and the dotted key path ("zero_optimization.stage"; empty for the whole config).
struct ConfigLocation {
  std::string source;
  int line = 0;
  std::string path;
};

std::string config_error_message(const ConfigLocation& where, const std::string& what);

// A config error: a fathom::Error that also says where it points (the checker uses that to
// go on past it and report every problem of a file at once).
class ConfigError : public Error {
 public:
  ConfigError(const char* file, int line, const ConfigLocation& where, const std::string& what)
      : Error(file, line, config_error_message(where, what)), where_(where) {}
  const ConfigLocation& where() const { return where_; }

 private:
  ConfigLocation where_;
};

// Throws ConfigError whose message() is config_error_message(where, what).
[[noreturn]] void throw_config_error(const ConfigLocation& where, const std::string& what);

// "a.b" from "a" and "b"; "b" from "" and "b".
std::string join_config_path(const std::string& parent, const std::string& key);

}  // namespace fathom
