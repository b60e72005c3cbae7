#pragma once
// Preference pairs (engine/rlhf/preference_data.h) as the token batches of RLHF's steps. Text is
// byte-level: each byte a token (vocabulary 256), and token 0 (a NUL byte, absent from text)
// pads. Pre-tokenized pairs bring their ids, and the caller names a pad id they do not contain.
// Sequences are right-padded to the batch's longest and cut at `max_length` tokens.

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "engine/data/dataset.h"  // kIgnoreIndex
#include "engine/rlhf/preference_data.h"

namespace fathom {

inline constexpr int64_t kBytePad = 0;

// Step 1: next-token batches of prompt + chosen with the loss on the response only: inputs
// (B, T) and targets (B, T), targets = the next token, kIgnoreIndex where that token belongs to
// the prompt or is padding.
struct SftBatch {
  Tensor inputs, targets;
};
SftBatch sft_batch(const std::vector<PreferencePair>& pairs, int64_t max_length, int64_t pad = kBytePad);

// Step 2: prompt + chosen and prompt + rejected, each (N, T) padded with kBytePad (the same T
// for both, as reward_pair_loss needs).
struct RewardBatch {
  Tensor chosen, rejected;
};
RewardBatch reward_batch(const std::vector<PreferencePair>& pairs, int64_t max_length, int64_t pad = kBytePad);

// Step 3: the prompts alone, (B, P); they must all have the same length (batched generation).
Tensor prompt_batch(const std::vector<PreferencePair>& pairs, int64_t pad = kBytePad);

// A pair's parts as tokens: the text's bytes, or the file's ids.
std::vector<int64_t> prompt_tokens(const PreferencePair& pair);
std::vector<int64_t> chosen_tokens(const PreferencePair& pair);
std::vector<int64_t> rejected_tokens(const PreferencePair& pair);

// The pairs as batches of `batch` prompts of one length each (generation needs that): grouped
// by prompt length in order of first appearance, each group cut into full batches (a group's
// remainder is left out). Prompts longer than `max_prompt_length` tokens are left out too.
std::vector<std::vector<PreferencePair>> same_length_batches(const std::vector<PreferencePair>& pairs, int64_t batch,
                                                             int64_t max_prompt_length);

}  // namespace fathom
