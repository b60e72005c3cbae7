// docs_check: keeps the Markdown documentation true to the code.
//
// It reads fenced blocks and the HTML-comment markers on the lines just above them:
//   <!-- snippet: PATH -->  the block's lines (trimmed, blank ones ignored) appear contiguously in
//                           PATH, a file the build compiles and the tests run. Lines of PATH that
//                           end in "// docs:skip" are scaffolding the reader does not see. Every
//                           ```cpp block must carry one, so every C++ snippet is compiled.
//   <!-- file: NAME -->     the block's text is written to NAME in the page's sandbox.
//   <!-- run -->            a ```console block runs: "$ " lines are commands (a trailing "\"
//                           continues one), the lines below a command are its expected output
//                           ("..." alone matches any lines; a "..." word inside a line any text
//                           there, so "step ... | loss ..." checks a log line's words, not its
//                           numbers); a command shown without output must exit 0.
//                           A ```sh block runs line by line, each line must exit 0.
// Each page runs in a sandbox directory of its own, with `build` linking to the build directory
// and the build's bin/ first on PATH, so "build/bin/fathom-train" and "fathom-train"
// both work as a reader would type them.
//
// Usage: docs_check --root REPO [--build BUILD] [--snippets-only] [--keep] PAGE.md ...
// Prints every problem as "page.md:line: what"; exits 1 if there was any.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr const char* kSkipTag = "// docs:skip";
constexpr int kCommandTimeoutSeconds = 300;

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Marker {
  std::string kind;  // snippet, file, run
  std::string argument;
};

struct Block {
  int line = 0;  // of the opening fence, 1-based
  std::string language;
  std::vector<std::string> lines;
  std::vector<Marker> markers;
  const Marker* marker(const std::string& kind) const {
    for (const Marker& m : markers)
      if (m.kind == kind) return &m;
    return nullptr;
  }
};

class Report {
 public:
  void problem(const std::string& where, const std::string& what) {
    std::cout << where << ": " << what << "\n";
    ++problems_;
  }
  int problems() const { return problems_; }

 private:
  int problems_ = 0;
};

std::optional<Marker> parse_marker(const std::string& line) {
  const std::string t = trim(line);
  if (!starts_with(t, "<!--") || !ends_with(t, "-->")) return std::nullopt;
  const std::string body = trim(t.substr(4, t.size() - 7));
  const auto colon = body.find(':');
  Marker m{trim(body.substr(0, colon)), colon == std::string::npos ? "" : trim(body.substr(colon + 1))};
  if (m.kind != "snippet" && m.kind != "file" && m.kind != "run") return std::nullopt;
  return m;
}

std::vector<Block> parse_blocks(const std::vector<std::string>& lines) {
  std::vector<Block> blocks;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!starts_with(lines[i], "```")) continue;
    Block block;
    block.line = static_cast<int>(i) + 1;
    block.language = trim(lines[i].substr(3));
    for (size_t j = i; j-- > 0;) {  // the markers on the lines just above the fence
      std::optional<Marker> m = parse_marker(lines[j]);
      if (!m) break;
      block.markers.push_back(*m);
    }
    std::reverse(block.markers.begin(), block.markers.end());
    for (++i; i < lines.size() && !starts_with(lines[i], "```"); ++i) block.lines.push_back(lines[i]);
    blocks.push_back(std::move(block));
  }
  return blocks;
}

// --- snippets ---------------------------------------------------------------------------------

std::vector<std::string> significant_lines(const std::vector<std::string>& lines, bool drop_skipped) {
  std::vector<std::string> out;
  for (const std::string& line : lines) {
    const std::string t = trim(line);
    if (t.empty() || (drop_skipped && ends_with(t, kSkipTag))) continue;
    out.push_back(t);
  }
  return out;
}

void check_snippet(const fs::path& root, const std::string& where, const Block& block, Report& report) {
  const Marker* marker = block.marker("snippet");
  if (!marker) {
    if (block.language == "cpp")
      report.problem(where,
                     "a C++ block without a <!-- snippet: FILE --> marker above it; put the code in a "
                     "compiled test file and name it, so the snippet cannot drift from the API");
    return;
  }
  const fs::path file = root / marker->argument;
  if (!fs::is_regular_file(file)) {
    report.problem(where, "the snippet file " + marker->argument + " does not exist");
    return;
  }
  const std::vector<std::string> want = significant_lines(block.lines, false);
  const std::vector<std::string> have = significant_lines(read_lines(file), true);
  size_t best = 0, best_at = 0;
  for (size_t start = 0; start < have.size(); ++start) {
    size_t n = 0;
    while (n < want.size() && start + n < have.size() && have[start + n] == want[n]) ++n;
    if (n > best) best = n, best_at = start;
    if (n == want.size()) return;
  }
  std::string what = "the block is not in " + marker->argument + " verbatim: its line \"" + want[best] + "\"";
  if (best == 0)
    what += " (the first) is not there";
  else
    what += " differs from \"" + (best_at + best < have.size() ? have[best_at + best] : "<end of file>") +
            "\", after " + std::to_string(best) + " matching lines";
  report.problem(where, what + "; change the doc or the file so that they agree");
}

// --- runnable blocks --------------------------------------------------------------------------

struct Command {
  int line = 0;
  std::string text;
  std::vector<std::string> expected;
};

struct Result {
  int status = 0;
  std::vector<std::string> output;
};

// The pages show what a user sees in a fresh shell: no FATHOM_* variable of the caller's (the
// launcher hands every one to the ranks, and scripts/test sets FATHOM_NUM_THREADS) reaches them.
void clear_fathom_environment() {
  std::vector<std::string> names;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    if (starts_with(variable, "FATHOM_")) names.push_back(variable.substr(0, variable.find('=')));
  }
  for (const std::string& name : names) unsetenv(name.c_str());
}

Result run_command(const fs::path& sandbox, const std::string& text) {
  const fs::path script = sandbox / ".docs_check_command.sh";
  std::ofstream(script) << text << "\n";
  const std::string shell = "cd '" + sandbox.string() + "' && timeout " + std::to_string(kCommandTimeoutSeconds) +
                            " bash .docs_check_command.sh 2>&1 </dev/null";
  Result result;
  FILE* pipe = popen(shell.c_str(), "r");
  if (!pipe) return {127, {"cannot start bash"}};
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    result.output.push_back(line);
  }
  return result;
}

// The pieces of an expected line between its standalone "..." words: "loss ... | io ... MB" gives
// "loss ", " | io ", " MB". A trailing "..." leaves an empty last piece and takes its space with it,
// so "step ..." also matches "step" alone.
std::vector<std::string> wildcard_pieces(const std::string& want) {
  std::vector<std::string> pieces(1);
  for (size_t i = 0; i < want.size();) {
    const bool word = want.compare(i, 3, "...") == 0 && (i == 0 || want[i - 1] == ' ') &&
                      (i + 3 == want.size() || want[i + 3] == ' ');
    if (word) {
      pieces.emplace_back();
      i += 3;
    } else {
      pieces.back() += want[i++];
    }
  }
  if (pieces.size() > 1 && pieces.back().empty() && ends_with(pieces[pieces.size() - 2], " "))
    pieces[pieces.size() - 2].pop_back();
  return pieces;
}

// A documented line against a printed one: "..." inside a line matches any text, so a log line's
// numbers may vary while its words and their order are checked (a line the program no longer
// prints that way fails).
bool line_matches(const std::string& want, const std::string& have) {
  const std::vector<std::string> pieces = wildcard_pieces(want);
  if (pieces.size() == 1) return want == have;
  if (!starts_with(have, pieces.front())) return false;
  size_t at = pieces.front().size();
  for (size_t p = 1; p + 1 < pieces.size(); ++p) {
    at = have.find(pieces[p], at);
    if (at == std::string::npos) return false;
    at += pieces[p].size();
  }
  return have.size() >= at + pieces.back().size() && ends_with(have, pieces.back());
}

// Expected lines against actual ones; "..." matches any run of lines (backtracking, both short).
bool output_matches(const std::vector<std::string>& want, size_t w, const std::vector<std::string>& have, size_t h) {
  if (w == want.size()) return h == have.size();
  if (trim(want[w]) == "...") {
    for (size_t k = h; k <= have.size(); ++k)
      if (output_matches(want, w + 1, have, k)) return true;
    return false;
  }
  return h < have.size() && line_matches(want[w], have[h]) && output_matches(want, w + 1, have, h + 1);
}

std::vector<Command> console_commands(const Block& block) {
  std::vector<Command> commands;
  bool continuing = false;
  for (size_t i = 0; i < block.lines.size(); ++i) {
    std::string line = block.lines[i];
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (continuing) {
      commands.back().text += "\n" + line;
    } else if (starts_with(line, "$ ")) {
      commands.push_back({block.line + 1 + static_cast<int>(i), line.substr(2), {}});
    } else if (!commands.empty()) {
      commands.back().expected.push_back(line);
      continue;
    } else {
      continue;
    }
    continuing = ends_with(line, "\\");
  }
  for (Command& c : commands)
    while (!c.expected.empty() && c.expected.back().empty()) c.expected.pop_back();
  return commands;
}

std::vector<Command> shell_commands(const Block& block) {
  std::vector<Command> commands;
  bool continuing = false;
  for (size_t i = 0; i < block.lines.size(); ++i) {
    const std::string& line = block.lines[i];
    if (continuing)
      commands.back().text += "\n" + line;
    else if (!trim(line).empty() && !starts_with(trim(line), "#"))
      commands.push_back({block.line + 1 + static_cast<int>(i), line, {}});
    else
      continue;
    continuing = ends_with(trim(line), "\\");
  }
  return commands;
}

std::string show(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& line : lines) s += "\n    | " + line;
  return s.empty() ? "\n    | <nothing>" : s;
}

void run_block(const fs::path& sandbox, const std::string& page, const Block& block, Report& report) {
  const bool console = block.language == "console";
  if (!console && block.language != "sh") {
    report.problem(page + ":" + std::to_string(block.line),
                   "<!-- run --> on a ```" + block.language + " block; only console and sh blocks run");
    return;
  }
  for (const Command& command : console ? console_commands(block) : shell_commands(block)) {
    const std::string where = page + ":" + std::to_string(command.line);
    const Result result = run_command(sandbox, command.text);
    if (result.status == 124) {
      report.problem(where, "`" + command.text + "` ran past " + std::to_string(kCommandTimeoutSeconds) + " s");
    } else if (command.expected.empty()) {
      if (result.status != 0)
        report.problem(where, "`" + command.text + "` exited with " + std::to_string(result.status) +
                                  "; its output:" + show(result.output));
    } else if (!output_matches(command.expected, 0, result.output, 0)) {
      report.problem(where, "`" + command.text + "` printed something else than the doc shows; the doc:" +
                                show(command.expected) + "\n  the program:" + show(result.output));
    }
  }
}

void write_file_block(const fs::path& sandbox, const Block& block) {
  const fs::path path = sandbox / block.marker("file")->argument;
  fs::create_directories(path.parent_path());
  std::ofstream out(path);
  for (const std::string& line : block.lines) out << line << "\n";
}

fs::path sandbox_root() { return fs::temp_directory_path() / ("fathom_docs_check_" + std::to_string(getpid())); }

fs::path make_sandbox(const fs::path& build, const std::string& page) {
  std::string name = page;
  std::replace(name.begin(), name.end(), '/', '_');
  const fs::path sandbox = sandbox_root() / name;
  fs::remove_all(sandbox);
  fs::create_directories(sandbox);
  fs::create_directory_symlink(fs::absolute(build), sandbox / "build");
  return sandbox;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path root = ".", build;
  bool snippets_only = false, keep = false;
  std::vector<std::string> pages;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--root" && i + 1 < argc) {
      root = argv[++i];
    } else if (arg == "--build" && i + 1 < argc) {
      build = argv[++i];
    } else if (arg == "--snippets-only") {
      snippets_only = true;
    } else if (arg == "--keep") {
      keep = true;
    } else if (starts_with(arg, "--")) {
      std::cerr << "docs_check: unknown option " << arg << "\n";
      return 2;
    } else {
      pages.push_back(arg);
    }
  }
  if (pages.empty() || (!snippets_only && build.empty())) {
    std::cerr << "usage: docs_check --root REPO [--build BUILD | --snippets-only] [--keep] PAGE.md ...\n";
    return 2;
  }
  if (!snippets_only) {
    const std::string path = (fs::absolute(build) / "bin").string() + ":" + std::getenv("PATH");
    setenv("PATH", path.c_str(), 1);
    clear_fathom_environment();
  }

  Report report;
  int snippets = 0, runs = 0;
  for (const std::string& page : pages) {
    const std::vector<std::string> lines = read_lines(root / page);
    if (lines.empty()) report.problem(page, "cannot read it, or it is empty");
    std::optional<fs::path> sandbox;
    for (const Block& block : parse_blocks(lines)) {
      const std::string where = page + ":" + std::to_string(block.line);
      check_snippet(root, where, block, report);
      snippets += block.marker("snippet") != nullptr;
      if (snippets_only) continue;
      if (block.marker("file") || block.marker("run"))
        if (!sandbox) sandbox = make_sandbox(build, page);
      if (block.marker("file")) write_file_block(*sandbox, block);
      if (block.marker("run")) run_block(*sandbox, page, block, report), ++runs;
    }
    if (sandbox && keep) std::cout << page << ": its sandbox is kept in " << sandbox->string() << "\n";
  }
  if (!keep) fs::remove_all(sandbox_root());
  std::cout << "docs_check: " << pages.size() << " pages, " << snippets << " snippets checked against their files";
  if (!snippets_only) std::cout << ", " << runs << " blocks run";
  std::cout << ": " << (report.problems() ? std::to_string(report.problems()) + " problems" : "all true") << "\n";
  return report.problems() ? 1 : 0;
}
