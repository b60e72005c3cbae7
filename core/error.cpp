#include "core/error.h"

namespace fathom {

// Fathom's own sources are compiled with -fmacro-prefix-map, so `file` is relative to the
// source tree ("core/tensor.cpp"), not a path on the build machine.
Error::Error(const char* file, int line, const std::string& message)
    : std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + message),
      message_(message),
      location_(std::string(file) + ":" + std::to_string(line)) {}

namespace detail {
void throw_error(const char* file, int line, const std::string& message) {
  throw Error(file, line, message);
}
}  // namespace detail
}  // namespace fathom
