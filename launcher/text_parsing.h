#pragma once
// Small text helpers shared by the launcher's file and option parsers (hostfile, .fathom_env,
// -i/-e filters), so every parser trims, splits and reports bad lines the same way.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom::launcher {

std::string_view trim(std::string_view text);
// Splits on every `separator`; empty pieces are kept (so "a,,b" has an empty middle piece the
// caller can reject).
std::vector<std::string_view> split(std::string_view text, char separator);
// Splits on runs of whitespace; no empty words.
std::vector<std::string> split_whitespace(std::string_view text);
// A decimal integer >= 0 made only of digits ("+1", "1.0", " 1" and overflow are nullopt).
std::optional<int> parse_non_negative_int(std::string_view text);
// A command-line flag's value: the whole text an integer (or a number) >= minimum, else an
// error "<flag>: expected an integer >= <minimum>, got "<text>"".
int64_t parse_flag_integer(const std::string& flag, const std::string& text, int64_t minimum);
double parse_flag_number(const std::string& flag, const std::string& text, double minimum);
// "1 slot", "2 slots".
std::string count_of(int count, std::string_view noun);
// `<kind> <source>:<line>: "<content>": <problem>`, the shape of every bad-line error.
std::string line_error(std::string_view kind, std::string_view source, int line, std::string_view content,
                       std::string_view problem);
// The contents of the file at `path`; throws "<kind> <path>: cannot read it (<reason>)".
std::string read_text_file(const std::string& path, std::string_view kind);

}  // namespace fathom::launcher
