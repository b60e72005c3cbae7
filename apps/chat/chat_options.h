#pragma once
// fathom-chat's command line: which of RLHF's three steps to run, on what data, with which
// configs, and PPO's options (DeepSpeed-Chat's names and defaults).

#include <cstdint>
#include <string>
#include <vector>

#include "engine/rlhf/ppo_iteration.h"

namespace fathom::apps {

struct ChatOptions {
  std::vector<int> steps = {1, 2, 3};  // --step 1|2|3|all (repeatable or "1,2")
  std::string out_dir = "fathom-chat-out";
  std::string data_path;               // JSON Lines of prompt/chosen/rejected; "": the built-in task
  std::vector<int> data_split = {2, 4, 4};  // DeepSpeed-Chat's --data_split: each step's share
  std::string arch = "gpt2";           // any registered architecture (models::ModelSpec)
  std::string preset = "tiny";
  int64_t vocab_size = 0;              // 0: the preset's (256 bytes for tiny); token-id data may need more
  uint64_t seed = 1234;
  // Each step's ds_config ("": built in). The reference model runs under the actor's config and
  // the frozen reward model under the critic's (their precision and ZeRO sections).
  std::string sft_config, reward_config, actor_config, critic_config;
  int64_t sft_steps = 800, reward_steps = 300, ppo_iterations = 120;
  int64_t max_length = 0;       // tokens of an SFT / reward sequence; 0: the model's positions
  int64_t eval_prompts = 256;   // held-out prompts (and pairs) each step is judged on
  int64_t save_interval = 0;    // checkpoint every N steps / iterations (0: at each step's end)
  int64_t print_interval = 10;  // PPO iterations between progress lines
  std::string actor_init;       // weights for step 1's start, as ModelSpec::load reads them ("": the seed's)
  bool resume = false;          // step 3 continues from its latest checkpoint
  bool ptx = false;             // mix step 1's loss into PPO (DeepSpeed-Chat's unsupervised term)
  int threads = 0;
  PpoOptions ppo;               // coefficients, clip ranges, epochs, sampling
  bool help = false;

  bool runs(int step) const;
  bool builtin_data() const { return data_path.empty(); }
};

// Throws naming the flag and what it accepts.
ChatOptions parse_chat_options(int argc, const char* const* argv);
std::string chat_usage();

}  // namespace fathom::apps
