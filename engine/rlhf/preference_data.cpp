#include "engine/rlhf/preference_data.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/json.h"

namespace fathom {
namespace {

constexpr int kDigits = 4;
const std::string kPromptHead = "sort ";

std::string digits_of(const std::string& prompt) {
  if (prompt.size() != kPromptHead.size() + kDigits + 1 || prompt.rfind(kPromptHead, 0) != 0) return "";
  return prompt.substr(kPromptHead.size(), kDigits);
}

}  // namespace

std::vector<PreferencePair> sorting_preference_pairs(int64_t count, uint64_t seed) {
  FATHOM_CHECK(count >= 0, "sorting_preference_pairs: count ", count, " must be >= 0");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> digit(0, 9);
  std::vector<PreferencePair> pairs;
  pairs.reserve(static_cast<size_t>(count));
  while (static_cast<int64_t>(pairs.size()) < count) {
    std::string digits(kDigits, '0');
    for (char& d : digits) d = static_cast<char>('0' + digit(rng));
    std::string sorted = digits;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end(), std::not_equal_to<>()) == sorted.end())
      continue;  // one repeated digit: no unsorted ordering to reject
    // The rejected answers cycle through three kinds, so that a reward model learns the order
    // itself, not "the prompt's digits sorted", and that an answer which is no digits at all
    // is worse: another ordering of the prompt's digits, any four digits out of order, four
    // letters.
    std::string rejected = sorted;
    switch (pairs.size() % 3) {
      case 0:
        while (rejected == sorted) std::shuffle(rejected.begin(), rejected.end(), rng);
        break;
      case 1:
        while (std::is_sorted(rejected.begin(), rejected.end()))
          for (char& d : rejected) d = static_cast<char>('0' + digit(rng));
        break;
      default:
        for (char& c : rejected) c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(rng));
    }
    pairs.push_back({kPromptHead + digits + ":", sorted + "\n", rejected + "\n"});
  }
  return pairs;
}

std::vector<PreferencePair> mixed_demonstrations(std::vector<PreferencePair> pairs) {
  for (size_t i = 0; i < pairs.size(); i += 2) pairs[i].chosen = pairs[i].rejected;
  return pairs;
}

namespace {
// The response up to its first "\n" when it starts with four digits, else "".
std::string answer_digits(const std::string& response) {
  const std::string answer = response.substr(0, response.find('\n'));
  if (answer.size() < static_cast<size_t>(kDigits)) return "";
  const std::string head = answer.substr(0, kDigits);
  return std::all_of(head.begin(), head.end(), [](char c) { return c >= '0' && c <= '9'; }) ? head : "";
}
}  // namespace

double sortedness(const std::string& response) {
  const std::string head = answer_digits(response);
  if (head.empty()) return 0.0;
  int ascending = 0;
  for (int i = 0; i + 1 < kDigits; ++i) ascending += head[i] <= head[i + 1] ? 1 : 0;
  return static_cast<double>(ascending) / (kDigits - 1);
}

bool keeps_digits(const std::string& prompt, const std::string& response) {
  std::string wanted = digits_of(prompt);
  FATHOM_CHECK(!wanted.empty(), "keeps_digits: \"", prompt, "\" is not a prompt of the built-in task (\"sort DDDD:\")");
  std::string given = answer_digits(response);
  std::sort(wanted.begin(), wanted.end());
  std::sort(given.begin(), given.end());
  return given == wanted;
}

std::vector<PreferencePair> read_preference_jsonl(const std::string& path) {
  std::ifstream in(path);
  FATHOM_CHECK(in.good(), "preference data \"", path, "\": cannot open the file (expected JSON Lines with "
               "\"prompt\", \"chosen\" and \"rejected\" on each line)");
  std::vector<PreferencePair> pairs;
  std::optional<bool> tokenized;  // the first line decides
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    const JsonValue value = parse_json(line, where);
    FATHOM_CHECK(value.is_object(), where, ": expected a JSON object with \"prompt\", \"chosen\" and \"rejected\", got ",
                 json_kind_name(value.kind()));
    PreferencePair pair;
    const std::pair<const char*, std::pair<std::string*, std::vector<int64_t>*>> fields[] = {
        {"prompt", {&pair.prompt, &pair.prompt_ids}},
        {"chosen", {&pair.chosen, &pair.chosen_ids}},
        {"rejected", {&pair.rejected, &pair.rejected_ids}}};
    for (const auto& [key, field] : fields) {
      const JsonValue* member = value.find(key);
      FATHOM_CHECK(member != nullptr, where, ": no \"", key, "\" (each line needs \"prompt\", \"chosen\" and \"rejected\")");
      FATHOM_CHECK(member->is_string() || member->is_array(), where, ": \"", key, "\" is ",
                   json_kind_name(member->kind()), ", not a string (text) or an array of token ids");
      const bool ids = member->is_array();
      if (!tokenized) tokenized = ids;
      FATHOM_CHECK(ids == *tokenized, where, ": \"", key, "\" is ", ids ? "token ids" : "text", " but the file's first "
                   "line is ", *tokenized ? "token ids" : "text", "; use one kind throughout");
      if (!ids) {
        *field.first = member->as_string();
        continue;
      }
      for (const JsonValue& id : member->as_array()) {
        FATHOM_CHECK(id.is_integer() && id.as_int64() >= 0, where, ": \"", key, "\" holds ", json_kind_name(id.kind()),
                     id.is_integer() ? " " + std::to_string(id.as_int64()) : std::string(),
                     "; token ids are integers >= 0");
        field.second->push_back(id.as_int64());
      }
    }
    FATHOM_CHECK(!*tokenized || !pair.prompt_ids.empty(), where, ": \"prompt\" has no token ids");
    pairs.push_back(std::move(pair));
  }
  FATHOM_CHECK(!pairs.empty(), "preference data \"", path, "\": no pairs (the file is empty)");
  return pairs;
}

}  // namespace fathom
