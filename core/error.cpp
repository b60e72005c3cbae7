#include "core/error.h"

namespace fathom {

// Fathom's own sources are compiled with -fmacro-prefix-map, so `file` is relative to the
// source tree ("core/tensor.cpp"), not a path on the build machine.
Error::Error(const char* file, int line, const std::string& message)
    : std::runtime_error(std::string(detail::source_path(file)) + ":" + std::to_string(line) + ": " + message),
      message_(message),
      location_(std::string(detail::source_path(file)) + ":" + std::to_string(line)) {}

namespace detail {
const char* source_path(const char* file) {
  for (;;) {
    if (file[0] == '.' && file[1] == '/') {
      file += 2;
    } else if (file[0] == '.' && file[1] == '.' && file[2] == '/') {
      file += 3;
    } else {
      return file;
    }
  }
}

void throw_error(const char* file, int line, const std::string& message) {
  throw Error(file, line, message);
}
}  // namespace detail
}  // namespace fathom
