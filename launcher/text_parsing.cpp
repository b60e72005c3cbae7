#include "launcher/text_parsing.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace fathom::launcher {

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  size_t begin = 0;
  for (size_t end; (end = text.find(separator, begin)) != std::string_view::npos; begin = end + 1)
    pieces.push_back(text.substr(begin, end - begin));
  pieces.push_back(text.substr(begin));
  return pieces;
}

std::vector<std::string> split_whitespace(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::optional<int> parse_non_negative_int(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  // from_chars accepts a leading '-'; the first character must be a digit.
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::string count_of(int count, std::string_view noun) {
  return detail::concat(count, " ", noun, count == 1 ? "" : "s");
}

std::string line_error(std::string_view kind, std::string_view source, int line, std::string_view content,
                       std::string_view problem) {
  // The line as the terminal should show it: control bytes escaped, at most 80 characters.
  constexpr size_t kShown = 80;
  std::string shown;
  for (char c : content.substr(0, kShown)) {
    const auto byte = static_cast<unsigned char>(c);
    constexpr const char* kHex = "0123456789abcdef";
    if (byte < 0x20 || byte == 0x7f) shown += detail::concat("\\x", kHex[byte >> 4], kHex[byte & 15]);
    else shown += c;
  }
  if (content.size() > kShown) shown += "...";
  return detail::concat(kind, " ", source, ":", line, ": \"", shown, "\": ", problem);
}

std::string read_text_file(const std::string& path, std::string_view kind) {
  std::error_code ignored;
  // A directory opens as a stream on Linux and then reads as empty.
  FATHOM_CHECK(!std::filesystem::is_directory(path, ignored), kind, " ", path, ": cannot read it (it is a directory)");
  std::ifstream in(path, std::ios::binary);
  FATHOM_CHECK(in.is_open(), kind, " ", path, ": cannot read it (", std::strerror(errno), ")");
  std::ostringstream text;
  text << in.rdbuf();
  // A binary file (a wrong path: a checkpoint, an executable) is named as such, not echoed.
  const std::string content = text.str();
  if (const size_t nul = content.find('\0'); nul != std::string::npos)
    FATHOM_FAIL(kind, " ", path, ": is not a text file (a NUL byte at offset ", nul, "); is it the right file?");
  return content;
}

int64_t parse_flag_integer(const std::string& flag, const std::string& text, int64_t minimum) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  FATHOM_CHECK(ec == std::errc() && end == text.data() + text.size() && value >= minimum, flag,
               ": expected an integer >= ", minimum, ", got \"", text, "\"");
  return value;
}

double parse_flag_number(const std::string& flag, const std::string& text, double minimum) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  FATHOM_CHECK(used == text.size() && used > 0 && value >= minimum, flag, ": expected a number >= ", minimum,
               ", got \"", text, "\"");
  return value;
}

}  // namespace fathom::launcher
