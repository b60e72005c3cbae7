#pragma once
// Leveled logging to stderr. The threshold comes from FATHOM_LOG_LEVEL
// (debug, info, warning, error, off; default info) and can be changed at run time.

#include <string>

#include "core/error.h"

namespace fathom {

enum class LogLevel { Debug = 0, Info = 1, Warning = 2, Error = 3, Off = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
// Parses a level name; throws naming the accepted names.
LogLevel parse_log_level(const std::string& name);
void log_message(LogLevel level, const std::string& message);

}  // namespace fathom

#define FATHOM_LOG(level, ...)                                                        \
  do {                                                                                \
    if (::fathom::LogLevel::level >= ::fathom::log_level())                           \
      ::fathom::log_message(::fathom::LogLevel::level, ::fathom::detail::concat(__VA_ARGS__)); \
  } while (0)
