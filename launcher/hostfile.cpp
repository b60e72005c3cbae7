#include "launcher/hostfile.h"

#include <algorithm>

#include "core/error.h"
#include "launcher/text_parsing.h"

namespace fathom::launcher {
namespace {

constexpr std::string_view kKind = "hostfile";
constexpr std::string_view kSlotsPrefix = "slots=";

std::string_view without_comment(std::string_view line) { return trim(line.substr(0, line.find('#'))); }

}  // namespace

std::vector<Host> parse_hostfile(std::string_view text, std::string_view source) {
  std::vector<Host> hosts;
  std::vector<int> defined_on;  // the line each host came from, for the duplicate error
  const std::vector<std::string_view> lines = split(text, '\n');
  for (size_t index = 0; index < lines.size(); ++index) {
    const int line_number = static_cast<int>(index) + 1;
    const std::string_view content = without_comment(lines[index]);
    if (content.empty()) continue;
    const auto fail = [&](const std::string& problem) {
      FATHOM_FAIL(line_error(kKind, source, line_number, content, problem));
    };

    const std::vector<std::string> words = split_whitespace(content);
    if (words.size() != 2 || !words[1].starts_with(kSlotsPrefix))
      fail("expected \"hostname slots=N\", e.g. \"worker-1 slots=8\"");
    if (words[0].find_first_of(":@,") != std::string::npos)
      fail("a host name cannot contain ':', '@' or ',' (they separate hosts and slots in --include/--exclude)");
    const std::optional<int> slots = parse_non_negative_int(std::string_view(words[1]).substr(kSlotsPrefix.size()));
    if (!slots || *slots == 0) fail("slots must be a positive integer");
    const auto previous = std::find_if(hosts.begin(), hosts.end(), [&](const Host& h) { return h.name == words[0]; });
    if (previous != hosts.end())
      fail(detail::concat("host ", words[0], " is already listed on line ", defined_on[previous - hosts.begin()],
                          "; list each host once"));
    hosts.push_back({words[0], *slots});
    defined_on.push_back(line_number);
  }
  FATHOM_CHECK(!hosts.empty(), kKind, " ", source, ": no hosts; add one line per host: \"hostname slots=N\"");
  return hosts;
}

std::vector<Host> read_hostfile(const std::string& path) { return parse_hostfile(read_text_file(path, kKind), path); }

}  // namespace fathom::launcher
