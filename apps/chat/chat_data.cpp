#include "apps/chat/chat_data.h"

#include <algorithm>

#include "core/error.h"
#include "engine/rlhf/batches.h"

namespace fathom::apps {

ChatData load_chat_data(const ChatOptions& o, const StepSizes& needed) {
  ChatData d;
  if (o.builtin_data()) {
    // Each step its own draw of the task (different seeds), so no step sees another's pairs.
    d.sft = mixed_demonstrations(sorting_preference_pairs(std::max<int64_t>(needed.sft, 1), o.seed));
    d.reward = sorting_preference_pairs(std::max<int64_t>(needed.reward, 1), o.seed + 1);
    d.ppo = sorting_preference_pairs(std::max<int64_t>(needed.ppo, 1), o.seed + 2);
    d.held_out = sorting_preference_pairs(o.eval_prompts, o.seed + 3);
    return d;
  }
  std::vector<PreferencePair> all = read_preference_jsonl(o.data_path);
  const int64_t total = static_cast<int64_t>(all.size());
  FATHOM_CHECK(total >= 2, "--data ", o.data_path, ": ", total, " pair; fathom-chat needs at least 2 (one to train on, one "
               "held out)");
  const int64_t held = std::clamp<int64_t>(total / 10, 1, o.eval_prompts);
  d.held_out.assign(all.end() - held, all.end());
  all.resize(static_cast<size_t>(total - held));
  const int64_t shares = o.data_split[0] + o.data_split[1] + o.data_split[2];
  std::vector<PreferencePair>* parts[3] = {&d.sft, &d.reward, &d.ppo};
  int64_t begin = 0;
  for (int step = 0; step < 3; ++step) {
    int64_t end = static_cast<int64_t>(all.size());
    if (step < 2) {
      int64_t share = 0;
      for (int s = 0; s <= step; ++s) share += o.data_split[s];
      end = static_cast<int64_t>(all.size()) * share / shares;
    }
    parts[step]->assign(all.begin() + begin, all.begin() + end);
    FATHOM_CHECK(!o.runs(step + 1) || !parts[step]->empty(), "--data ", o.data_path, ": step ", step + 1, " gets no pairs "
                 "of the ", all.size(), " (--data-split ", o.data_split[0], ",", o.data_split[1], ",", o.data_split[2],
                 "); raise its share");
    begin = end;
  }
  return d;
}

int64_t pad_token(const ChatData& data, int64_t vocab_size) {
  const std::vector<PreferencePair>* parts[] = {&data.sft, &data.reward, &data.ppo, &data.held_out};
  bool tokenized = false;
  for (const auto* part : parts)
    for (const PreferencePair& p : *part) {
      if (!p.tokenized()) continue;
      tokenized = true;
      for (const auto* ids : {&p.prompt_ids, &p.chosen_ids, &p.rejected_ids})
        for (int64_t id : *ids)
          FATHOM_CHECK(id < vocab_size - 1, "--data: token id ", id, " is outside the model's vocabulary of ",
                       vocab_size, " ids less its last (", vocab_size - 1, ", the pad token); pass --vocab-size or a "
                       "--preset whose vocabulary holds the tokenizer's");
    }
  return tokenized ? vocab_size - 1 : kBytePad;
}

std::vector<PreferencePair> cyclic_slice(const std::vector<PreferencePair>& data, int64_t start, int64_t count) {
  FATHOM_CHECK(!data.empty(), "cyclic_slice: no data");
  std::vector<PreferencePair> out;
  out.reserve(static_cast<size_t>(count));
  const int64_t n = static_cast<int64_t>(data.size());
  for (int64_t i = 0; i < count; ++i) out.push_back(data[static_cast<size_t>((start + i) % n)]);
  return out;
}

}  // namespace fathom::apps
