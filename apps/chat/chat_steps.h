#pragma once
// fathom-chat's three steps (DeepSpeed-Chat's): each trains through DeepSpeed engines built from
// its own config, checkpoints under DIR/stepN, writes its model as safetensors for the next and
// records what it achieved on the held-out data in the summary.
//   step 1: DIR/step1/actor/ (a Hugging Face model folder of the chosen architecture)
//   step 2: DIR/step2/reward_model.safetensors (the backbone's names plus v_head.weight)
//   step 3: DIR/step3/actor/ and critic.safetensors; resumable (--resume)

#include <filesystem>

#include "engine/config/config.h"
#include "apps/chat/chat_data.h"
#include "apps/chat/chat_evaluation.h"
#include "apps/chat/chat_options.h"
#include "models/model_spec.h"
#include "parallel/runtime.h"

namespace fathom::apps {

struct ChatConfigs {
  Config sft, reward, actor, critic;
};
// Each step's config from its file, or the built-in one, batch sizes resolved for `world` ranks.
ChatConfigs load_chat_configs(const ChatOptions& options, int world);

struct ChatRun {
  const ChatOptions& options;
  const parallel::Runtime& runtime;
  models::ModelSpec model;
  ChatConfigs configs;
  ChatData data;
  ChatSummary& summary;
  std::filesystem::path out;
  int64_t pad;  // the pad token: 0 (NUL) for text, the vocabulary's last id for token ids
  int64_t max_length() const { return options.max_length ? options.max_length : model.max_positions(); }
};

void run_sft(ChatRun& run);
void run_reward_model(ChatRun& run);
void run_ppo(ChatRun& run);

}  // namespace fathom::apps
