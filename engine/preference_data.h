#pragma once
// The data of RLHF's three steps: (prompt, chosen, rejected) text triples. SFT trains on
// prompt -> chosen, the reward model on chosen vs rejected, PPO generates from the prompts.
//
// User data: JSON Lines with "prompt", "chosen" and "rejected" strings per line (the layout of
// DeepSpeed-Chat's common sets, e.g. Dahoas/rm-static), read byte-level.
//
// Built-in data: a synthetic task whose preference rule the models never see, so that training
// can be judged by the true rule, not only by the learned reward. Prompts are "sort DDDD:" (four
// random digits); the preferred response is the digits in ascending order, then "\n"; the
// rejected one is, alternately, another ordering of the same digits or a sorted answer with one
// digit wrong. sortedness() scores any response by the rule itself.

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

struct PreferencePair {
  std::string prompt, chosen, rejected;
};

// `count` pairs of the built-in sorting task from `seed` (the same seed gives the same pairs).
std::vector<PreferencePair> sorting_preference_pairs(int64_t count, uint64_t seed);

// The true metric of the built-in task for one generated response to a "sort DDDD:" prompt, in
// [0, 1]: 0 unless the response starts with a reordering of the prompt's digits; then the share
// of its 3 neighbouring pairs that are in ascending order (1: sorted). Text after the first
// "\n" is ignored.
double sortedness(const std::string& prompt, const std::string& response);

// Reads JSON Lines of {"prompt", "chosen", "rejected"} strings (other keys are ignored; blank
// lines are skipped). A missing file, a line that is not a JSON object, or a missing or
// non-string key is an error naming the file and line.
std::vector<PreferencePair> read_preference_jsonl(const std::string& path);

}  // namespace fathom
