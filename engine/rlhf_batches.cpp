#include "engine/rlhf_batches.h"

#include <algorithm>
#include <map>
#include <string>

#include "core/error.h"

namespace fathom {
namespace {

std::vector<int64_t> bytes_of(const std::string& text) {
  std::vector<int64_t> tokens;
  tokens.reserve(text.size());
  for (const unsigned char c : text) tokens.push_back(c);
  return tokens;
}

void check_pairs(const std::vector<PreferencePair>& pairs, int64_t max_length, const char* op) {
  FATHOM_CHECK(!pairs.empty(), op, ": no pairs");
  FATHOM_CHECK(max_length >= 2, op, ": max_length ", max_length, " must be >= 2");
  for (const PreferencePair& p : pairs) {
    FATHOM_CHECK(!p.prompt.empty(), op, ": a pair has an empty prompt");
    for (const std::string* text : {&p.prompt, &p.chosen, &p.rejected})
      FATHOM_CHECK(text->find('\0') == std::string::npos, op, ": a pair's text contains a NUL byte, which pads");
  }
}

// Rows of tokens right-padded (and cut) to one length.
Tensor padded(const std::vector<std::vector<int64_t>>& rows, int64_t length, int64_t pad) {
  std::vector<int64_t> flat(rows.size() * length, pad);
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy_n(rows[r].begin(), std::min<int64_t>(length, rows[r].size()), flat.begin() + r * length);
  return Tensor::from_vector(flat, {static_cast<int64_t>(rows.size()), length});
}

}  // namespace

SftBatch sft_batch(const std::vector<PreferencePair>& pairs, int64_t max_length) {
  check_pairs(pairs, max_length, "sft_batch");
  std::vector<std::vector<int64_t>> inputs, targets;
  int64_t longest = 0;
  for (const PreferencePair& p : pairs) {
    const std::vector<int64_t> tokens = bytes_of(p.prompt + p.chosen);
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_length + 1) - 1;
    std::vector<int64_t> in(tokens.begin(), tokens.begin() + n), out(tokens.begin() + 1, tokens.begin() + n + 1);
    // Position t predicts token t + 1: ignored while that token is still the prompt's.
    for (int64_t t = 0; t < n && t + 1 < static_cast<int64_t>(p.prompt.size()); ++t) out[t] = kIgnoreIndex;
    longest = std::max(longest, n);
    inputs.push_back(std::move(in));
    targets.push_back(std::move(out));
  }
  return {padded(inputs, longest, kBytePad), padded(targets, longest, kIgnoreIndex)};
}

RewardBatch reward_batch(const std::vector<PreferencePair>& pairs, int64_t max_length) {
  check_pairs(pairs, max_length, "reward_batch");
  std::vector<std::vector<int64_t>> chosen, rejected;
  int64_t longest = 0;
  for (const PreferencePair& p : pairs) {
    chosen.push_back(bytes_of(p.prompt + p.chosen));
    rejected.push_back(bytes_of(p.prompt + p.rejected));
    longest = std::max<int64_t>({longest, static_cast<int64_t>(chosen.back().size()),
                                 static_cast<int64_t>(rejected.back().size())});
  }
  const int64_t length = std::min(longest, max_length);
  return {padded(chosen, length, kBytePad), padded(rejected, length, kBytePad)};
}

Tensor prompt_batch(const std::vector<PreferencePair>& pairs) {
  FATHOM_CHECK(!pairs.empty(), "prompt_batch: no pairs");
  const size_t length = pairs.front().prompt.size();
  std::vector<std::vector<int64_t>> rows;
  for (const PreferencePair& p : pairs) {
    FATHOM_CHECK(p.prompt.size() == length, "prompt_batch: prompts of ", length, " and ", p.prompt.size(),
                 " bytes in one batch; batched generation needs prompts of one length");
    rows.push_back(bytes_of(p.prompt));
  }
  return padded(rows, static_cast<int64_t>(length), kBytePad);
}

std::vector<std::vector<PreferencePair>> same_length_batches(const std::vector<PreferencePair>& pairs, int64_t batch,
                                                             int64_t max_prompt_length) {
  FATHOM_CHECK(batch >= 1, "same_length_batches: batch ", batch, " must be >= 1");
  std::vector<size_t> lengths;  // in order of first appearance
  std::map<size_t, std::vector<PreferencePair>> groups;
  for (const PreferencePair& p : pairs) {
    if (p.prompt.empty() || static_cast<int64_t>(p.prompt.size()) > max_prompt_length) continue;
    auto& group = groups[p.prompt.size()];
    if (group.empty()) lengths.push_back(p.prompt.size());
    group.push_back(p);
  }
  std::vector<std::vector<PreferencePair>> batches;
  for (size_t length : lengths) {
    const auto& group = groups[length];
    for (size_t start = 0; start + batch <= group.size(); start += batch)
      batches.emplace_back(group.begin() + start, group.begin() + start + batch);
  }
  return batches;
}

}  // namespace fathom
