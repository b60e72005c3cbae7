#include "engine/rlhf/batches.h"

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

void check_pairs(const std::vector<PreferencePair>& pairs, int64_t max_length, int64_t pad, const char* op) {
  FATHOM_CHECK(!pairs.empty(), op, ": no pairs");
  FATHOM_CHECK(max_length >= 2, op, ": max_length ", max_length, " must be >= 2");
  for (const PreferencePair& p : pairs) {
    FATHOM_CHECK(!prompt_tokens(p).empty(), op, ": a pair has an empty prompt");
    for (const auto& tokens : {prompt_tokens(p), chosen_tokens(p), rejected_tokens(p)})
      FATHOM_CHECK(std::find(tokens.begin(), tokens.end(), pad) == tokens.end(), op, ": a pair contains the pad token ",
                   pad, p.tokenized() ? "; pad with an id the data does not use" : " (a NUL byte in the text)");
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

std::vector<int64_t> prompt_tokens(const PreferencePair& p) { return p.tokenized() ? p.prompt_ids : bytes_of(p.prompt); }
std::vector<int64_t> chosen_tokens(const PreferencePair& p) { return p.tokenized() ? p.chosen_ids : bytes_of(p.chosen); }
std::vector<int64_t> rejected_tokens(const PreferencePair& p) {
  return p.tokenized() ? p.rejected_ids : bytes_of(p.rejected);
}

SftBatch sft_batch(const std::vector<PreferencePair>& pairs, int64_t max_length, int64_t pad) {
  check_pairs(pairs, max_length, pad, "sft_batch");
  std::vector<std::vector<int64_t>> inputs, targets;
  int64_t longest = 0;
  for (const PreferencePair& p : pairs) {
    const std::vector<int64_t> prompt = prompt_tokens(p);
    std::vector<int64_t> tokens = prompt;
    for (int64_t t : chosen_tokens(p)) tokens.push_back(t);
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_length + 1) - 1;
    std::vector<int64_t> in(tokens.begin(), tokens.begin() + n), out(tokens.begin() + 1, tokens.begin() + n + 1);
    // Position t predicts token t + 1: ignored while that token is still the prompt's.
    for (int64_t t = 0; t < n && t + 1 < static_cast<int64_t>(prompt.size()); ++t) out[t] = kIgnoreIndex;
    longest = std::max(longest, n);
    inputs.push_back(std::move(in));
    targets.push_back(std::move(out));
  }
  return {padded(inputs, longest, pad), padded(targets, longest, kIgnoreIndex)};
}

RewardBatch reward_batch(const std::vector<PreferencePair>& pairs, int64_t max_length, int64_t pad) {
  check_pairs(pairs, max_length, pad, "reward_batch");
  std::vector<std::vector<int64_t>> chosen, rejected;
  int64_t longest = 0;
  for (const PreferencePair& p : pairs) {
    const std::vector<int64_t> prompt = prompt_tokens(p);
    for (auto [rows, response] : {std::pair{&chosen, chosen_tokens(p)}, std::pair{&rejected, rejected_tokens(p)}}) {
      rows->push_back(prompt);
      rows->back().insert(rows->back().end(), response.begin(), response.end());
    }
    longest = std::max<int64_t>({longest, static_cast<int64_t>(chosen.back().size()),
                                 static_cast<int64_t>(rejected.back().size())});
  }
  const int64_t length = std::min(longest, max_length);
  return {padded(chosen, length, pad), padded(rejected, length, pad)};
}

Tensor prompt_batch(const std::vector<PreferencePair>& pairs, int64_t pad) {
  FATHOM_CHECK(!pairs.empty(), "prompt_batch: no pairs");
  std::vector<std::vector<int64_t>> rows;
  for (const PreferencePair& p : pairs) {
    rows.push_back(prompt_tokens(p));
    FATHOM_CHECK(rows.back().size() == rows.front().size(), "prompt_batch: prompts of ", rows.front().size(), " and ",
                 rows.back().size(), " tokens in one batch; batched generation needs prompts of one length");
  }
  return padded(rows, static_cast<int64_t>(rows.front().size()), pad);
}

std::vector<std::vector<PreferencePair>> same_length_batches(const std::vector<PreferencePair>& pairs, int64_t batch,
                                                             int64_t max_prompt_length) {
  FATHOM_CHECK(batch >= 1, "same_length_batches: batch ", batch, " must be >= 1");
  std::vector<size_t> lengths;  // in order of first appearance
  std::map<size_t, std::vector<PreferencePair>> groups;
  for (const PreferencePair& p : pairs) {
    const size_t length = prompt_tokens(p).size();
    if (length == 0 || static_cast<int64_t>(length) > max_prompt_length) continue;
    auto& group = groups[length];
    if (group.empty()) lengths.push_back(length);
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
