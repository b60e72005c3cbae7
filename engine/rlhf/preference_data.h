#pragma once
// The data of RLHF's three steps: (prompt, chosen, rejected) text triples. SFT trains on
// prompt -> chosen, the reward model on chosen vs rejected, PPO generates from the prompts.
//
// User data: JSON Lines with "prompt", "chosen" and "rejected" strings per line (the layout of
// DeepSpeed-Chat's common sets, e.g. Dahoas/rm-static), read byte-level.
//
// Built-in data: a synthetic task whose preference rule the models never see, so that training
// can be judged by the rule itself, not only by the learned reward. Prompts are "sort DDDD:"
// (four random digits, not all equal); the rule: responses in ascending order are preferred.
// Each pair's chosen response is the digits in ascending order, then "\n"; the rejected ones
// cycle through another ordering of the same digits, four random digits out of order, and four
// random letters.
// sortedness() scores any response by the rule; keeps_digits() says whether it kept the
// prompt's digits, which the rule (and so the reward model) does not ask for: a policy optimised against the reward model may stop keeping them.

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

struct PreferencePair {
  std::string prompt, chosen, rejected;  // text, read byte-level
  // Or token ids, from a pre-tokenized file (the text fields are then empty).
  std::vector<int64_t> prompt_ids, chosen_ids, rejected_ids;
  bool tokenized() const { return !prompt_ids.empty(); }
};

// `count` pairs of the built-in sorting task from `seed` (the same seed gives the same pairs).
std::vector<PreferencePair> sorting_preference_pairs(int64_t count, uint64_t seed);

// Step 1's demonstrations for the built-in task: the pairs with every other chosen response
// replaced by the rejected one. Demonstrations of mixed quality, as real ones are: the SFT
// policy learns the task's format and sorts about half the time, so steps 2 and 3 have a
// preference left to teach. (User data trains step 1 on "chosen", as DeepSpeed-Chat does.)
std::vector<PreferencePair> mixed_demonstrations(std::vector<PreferencePair> pairs);

// The true metric of the built-in task for one generated response, in [0, 1]: 0 unless the
// response starts with four digits; then the share of their 3 neighbouring pairs in ascending
// order (1: sorted). Text after the first "\n" is ignored.
double sortedness(const std::string& response);
// Whether the response's first four characters are a reordering of the prompt's digits.
bool keeps_digits(const std::string& prompt, const std::string& response);

// Reads JSON Lines of {"prompt", "chosen", "rejected"}: strings (text), or arrays of token ids
// (integers >= 0: data tokenized beforehand, e.g. with GPT-2's tokenizer), one kind for the whole
// file. Other keys are ignored; blank lines are skipped. A missing file, a line that is not a JSON object, or a missing or
// non-string key is an error naming the file and line.
std::vector<PreferencePair> read_preference_jsonl(const std::string& path);

}  // namespace fathom
