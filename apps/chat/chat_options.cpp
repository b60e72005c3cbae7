#include "apps/chat/chat_options.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>

#include "core/error.h"
#include "launcher/text_parsing.h"
#include "models/model_spec.h"

namespace fathom::apps {

// The launcher's text parsing, shared by every program.
using launcher::parse_flag_integer;
using launcher::parse_flag_number;
using launcher::split;
using launcher::trim;
namespace {

std::vector<int> parse_steps(const std::string& text) {
  if (text == "all") return {1, 2, 3};
  std::vector<int> steps;
  for (std::string_view part : split(text, ',')) {
    const std::string step(trim(part));
    FATHOM_CHECK(step == "1" || step == "2" || step == "3", "--step: \"", text,
                 "\" is not a step; use 1, 2, 3, a list such as 2,3, or all");
    steps.push_back(step[0] - '0');
  }
  return steps;
}

std::vector<int> parse_split(const std::string& text) {
  std::vector<int> parts;
  for (std::string_view part : split(text, ',')) parts.push_back(static_cast<int>(parse_flag_integer("--data-split", std::string(trim(part)), 0)));
  FATHOM_CHECK(parts.size() == 3 && parts[0] + parts[1] + parts[2] > 0, "--data-split: \"", text,
               "\" must be three non-negative shares, one per step, e.g. 2,4,4 (DeepSpeed-Chat's default)");
  return parts;
}

}  // namespace

bool ChatOptions::runs(int step) const { return std::find(steps.begin(), steps.end(), step) != steps.end(); }

ChatOptions parse_chat_options(int argc, const char* const* argv) {
  ChatOptions o;
  o.ppo.sampling.max_new_tokens = 0;  // 0 until the data is known: 5 on the built-in task, else 64
  const std::vector<std::string> args(argv + 1, argv + argc);
  using Setter = std::function<void(const std::string& flag, const std::string& value)>;
  const auto integer = [](int64_t& field, int64_t minimum) {
    return Setter([&field, minimum](const std::string& f, const std::string& v) { field = parse_flag_integer(f, v, minimum); });
  };
  const auto number = [](double& field, double minimum) {
    return Setter([&field, minimum](const std::string& f, const std::string& v) { field = parse_flag_number(f, v, minimum); });
  };
  const auto text = [](std::string& field) { return Setter([&field](const std::string&, const std::string& v) { field = v; }); };
  int64_t seed = static_cast<int64_t>(o.seed), threads = 0, ppo_epochs = o.ppo.ppo_epochs;
  const std::map<std::string, Setter> valued = {
      {"--step", [&](const std::string&, const std::string& v) { o.steps = parse_steps(v); }},
      {"--out", text(o.out_dir)},
      {"--data", text(o.data_path)},
      {"--data-split", [&](const std::string&, const std::string& v) { o.data_split = parse_split(v); }},
      {"--arch", text(o.arch)},
      {"--preset", text(o.preset)},
      {"--vocab-size", integer(o.vocab_size, 2)},
      {"--seed", integer(seed, 0)},
      {"--sft-config", text(o.sft_config)},
      {"--reward-config", text(o.reward_config)},
      {"--actor-config", text(o.actor_config)},
      {"--critic-config", text(o.critic_config)},
      {"--sft-steps", integer(o.sft_steps, 0)},
      {"--reward-steps", integer(o.reward_steps, 0)},
      {"--ppo-iterations", integer(o.ppo_iterations, 0)},
      {"--max-length", integer(o.max_length, 2)},
      {"--eval-prompts", integer(o.eval_prompts, 1)},
      {"--save-interval", integer(o.save_interval, 0)},
      {"--print-interval", integer(o.print_interval, 1)},
      {"--actor-init", text(o.actor_init)},
      {"--threads", integer(threads, 1)},
      {"--ppo-epochs", integer(ppo_epochs, 1)},
      {"--kl-ctl", number(o.ppo.coefficients.kl_ctl, 0)},
      {"--clip-reward-value", number(o.ppo.coefficients.clip_reward_value, 0)},
      {"--cliprange", number(o.ppo.cliprange, 0)},
      {"--cliprange-value", number(o.ppo.cliprange_value, 0)},
      {"--gamma", number(o.ppo.coefficients.gamma, 0)},
      {"--lam", number(o.ppo.coefficients.lam, 0)},
      {"--unsup-coef", number(o.ppo.unsup_coef, 0)},
      {"--max-new-tokens", integer(o.ppo.sampling.max_new_tokens, 1)},
      {"--temperature", number(o.ppo.sampling.temperature, 0)},
      {"--top-k", integer(o.ppo.sampling.top_k, 0)},
      {"--top-p", number(o.ppo.sampling.top_p, 0)},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "-h" || flag == "--help") {
      o.help = true;
    } else if (flag == "--resume") {
      o.resume = true;
    } else if (flag == "--ptx") {
      o.ptx = true;
    } else if (flag == "--whiten-advantages") {
      o.ppo.whiten_advantages = true;
    } else if (const auto found = valued.find(flag); found != valued.end()) {
      FATHOM_CHECK(i + 1 < args.size(), flag, ": needs a value (fathom-chat --help lists the options)");
      found->second(flag, args[++i]);
    } else {
      FATHOM_FAIL("unknown option \"", flag, "\" (fathom-chat --help lists the options)");
    }
  }
  FATHOM_CHECK(o.ppo.sampling.top_p > 0 && o.ppo.sampling.top_p <= 1, "--top-p: ", o.ppo.sampling.top_p,
               " must be in (0, 1]");
  o.seed = static_cast<uint64_t>(seed);
  o.threads = static_cast<int>(threads);
  o.ppo.ppo_epochs = static_cast<int>(ppo_epochs);
  models::ModelSpec::preset(o.arch, o.preset);  // validates the names
  return o;
}

std::string chat_usage() {
  return R"(fathom-chat: RLHF in one command, DeepSpeed-Chat's three steps on a decoder of
any architecture (GPT-2 by default).
  1. supervised fine-tuning (SFT) of the actor on prompt -> response pairs
  2. a reward model (the same decoder with a scalar value head) on chosen vs rejected responses
  3. PPO: the actor generates, the reward model scores, actor and critic learn
With no arguments it runs all three on the built-in task (sort four digits; the preference
rule, ascending order, is hidden from the models) and prints what each step achieved.

usage: fathom-chat [options]            (under mpirun -np N: data parallel on N ranks)
  --step S               1, 2, 3, a list (2,3) or all (default)
  --out DIR              where each step writes its model, checkpoints and summary (fathom-chat-out)
  --data FILE            JSON Lines {"prompt", "chosen", "rejected"}: text, or arrays of token ids
                         (default: the built-in task)
  --data-split A,B,C     each step's share of --data (2,4,4); the last --eval-prompts pairs are held out
  --arch NAME            gpt2 (default), llama, qwen2 or mistral (docs/models.md)
  --preset NAME          model sizes: tiny (default), small; gpt2 also gpt2-124M, the others 100M, 350M
  --vocab-size N         the vocabulary (default the preset's); token-id data pads with its last id
  --actor-init PATH      weights the SFT starts from: a Hugging Face model folder of the architecture
                         (gpt2 also a GPT-2-layout .safetensors file); default: the seed's weights
  --sft-config F, --reward-config F, --actor-config F, --critic-config F
                         each step's ds_config (defaults built in; gradient_accumulation_steps 1 in
                         step 3). The reference runs under the actor's, the reward model under the critic's.
  --sft-steps N (800), --reward-steps N (300), --ppo-iterations N (120)
  --max-length N         tokens per SFT / reward sequence (default: the model's block size)
  --eval-prompts N       held-out prompts each step is judged on (256)
  --save-interval N      checkpoint every N steps or iterations (default: at each step's end)
  --resume               step 3 continues from its latest checkpoint in DIR/step3
  --seed N, --threads N, --print-interval N (PPO iterations per progress line, 10)
PPO (DeepSpeed-Chat's defaults):
  --ppo-epochs N (1)  --kl-ctl X (0.1)  --clip-reward-value X (5)  --cliprange X (0.2)
  --cliprange-value X (0.2)  --gamma X (1.0)  --lam X (0.95)  --whiten-advantages (off)
  --ptx  mix the SFT loss into the actor's training, weighted by --unsup-coef X (27.8)
  --max-new-tokens N (5 on the built-in task, else 64)  --temperature X (1)  --top-k N (0: all)  --top-p X (1)
)";
}

}  // namespace fathom::apps
