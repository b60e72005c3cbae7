#pragma once
// "Did you mean ...?" for names a user typed (config keys, tensor names): the closest
// candidate by edit distance, when it is close enough to be a plausible typo.

#include <string>
#include <vector>

namespace fathom {

// Levenshtein distance (insertions, deletions, substitutions; ASCII case-sensitive).
size_t levenshtein_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word` (ignoring case) if it is within max(2, |word| / 3) edits, else "".
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean \"x\"?)" or "" — ready to append to an error message.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace fathom
