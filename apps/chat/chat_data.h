#pragma once
// The data of fathom-chat's steps: the built-in sorting task (engine/rlhf/preference_data.h), or a
// JSON Lines file split between the steps as DeepSpeed-Chat's --data_split does, with the last
// pairs held out for judging each step.

#include <cstdint>
#include <vector>

#include "engine/rlhf/preference_data.h"
#include "apps/chat/chat_options.h"

namespace fathom::apps {

struct ChatData {
  std::vector<PreferencePair> sft, reward, ppo, held_out;
};

// `needed`: the pairs each step consumes (steps x global batch), what the built-in task draws;
// a file's parts are cycled through instead. A step that runs with no data is an error naming
// the share to raise.
struct StepSizes {
  int64_t sft = 0, reward = 0, ppo = 0;
};
ChatData load_chat_data(const ChatOptions& options, const StepSizes& needed);

// The pad token: 0 (NUL, absent from text) for text; for token ids the vocabulary's last id
// (GPT-2's <|endoftext|>, DeepSpeed-Chat's pad), which the data must not use. Every id must be
// inside the vocabulary; an error names the first that is not.
int64_t pad_token(const ChatData& data, int64_t vocab_size);

// `count` pairs of `data` from position `start` on, wrapping around (epochs).
std::vector<PreferencePair> cyclic_slice(const std::vector<PreferencePair>& data, int64_t start, int64_t count);

}  // namespace fathom::apps
