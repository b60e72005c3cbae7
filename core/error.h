#pragma once
// Errors: every failure in Fathom is a fathom::Error carrying where it was raised and a
// message that names the problem and, where one exists, the fix. Library code never exits.

#include <sstream>
#include <stdexcept>
#include <string>

namespace fathom {

class Error : public std::runtime_error {
 public:
  Error(const char* file, int line, const std::string& message);
  // The message without the "file:line: " prefix, for user-facing reports.
  const std::string& message() const { return message_; }
  const std::string& location() const { return location_; }

 private:
  std::string message_;
  std::string location_;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
// `file` as a path in the source tree ("core/tensor.cpp"): drops the "../" and "./" that
// ccache's base_dir leaves in front of __FILE__ (CMakeLists.txt, "ccache").
const char* source_path(const char* file);
}  // namespace detail

}  // namespace fathom

// FATHOM_CHECK(cond, "message ", value, ...): throws fathom::Error with file:line when cond is false.
#define FATHOM_CHECK(cond, ...)                                                      \
  do {                                                                               \
    if (!(cond)) [[unlikely]]                                                        \
      ::fathom::detail::throw_error(__FILE__, __LINE__, ::fathom::detail::concat(__VA_ARGS__)); \
  } while (0)

#define FATHOM_FAIL(...) ::fathom::detail::throw_error(__FILE__, __LINE__, ::fathom::detail::concat(__VA_ARGS__))
