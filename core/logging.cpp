#include "core/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace fathom {
namespace {
LogLevel level_from_environment() {
  const char* env = std::getenv("FATHOM_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return LogLevel::Info;
  try {
    return parse_log_level(env);
  } catch (const Error& e) {
    std::fprintf(stderr, "fathom: ignoring FATHOM_LOG_LEVEL: %s\n", e.message().c_str());
    return LogLevel::Info;
  }
}

std::atomic<LogLevel>& current_level() {
  static std::atomic<LogLevel> level{level_from_environment()};
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
    case LogLevel::Off: return "off";
  }
  return "?";
}
}  // namespace

LogLevel log_level() { return current_level().load(std::memory_order_relaxed); }
void set_log_level(LogLevel level) { current_level().store(level, std::memory_order_relaxed); }

LogLevel parse_log_level(const std::string& name) {
  for (LogLevel level : {LogLevel::Debug, LogLevel::Info, LogLevel::Warning, LogLevel::Error, LogLevel::Off})
    if (name == level_name(level)) return level;
  FATHOM_FAIL("unknown log level \"", name, "\"; use one of debug, info, warning, error, off");
}

void log_message(LogLevel level, const std::string& message) {
  static std::mutex mutex;  // one line at a time, even from worker threads
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "fathom [%s] %s\n", level_name(level), message.c_str());
}

}  // namespace fathom
