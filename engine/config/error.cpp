#include "engine/config/error.h"

#include "core/error.h"

namespace fathom {

std::string config_error_message(const ConfigLocation& where, const std::string& what) {
  // Built by appending (GCC 12 warns falsely on chained + of short strings here).
  std::string message;
  if (!where.source.empty()) {
    message += where.source;
    if (where.line > 0) message.append(":").append(std::to_string(where.line));
    message += ": ";
  }
  message += "config error";
  if (!where.path.empty()) message.append(" at ").append(where.path);
  message.append(": ").append(what);
  return message;
}

void throw_config_error(const ConfigLocation& where, const std::string& what) {
  throw ConfigError(__FILE__, __LINE__, where, what);
}

std::string join_config_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

}  // namespace fathom
