// fathom-chat: RLHF in one command — DeepSpeed-Chat's three steps (SFT, reward model, PPO) on
// any registered architecture (--arch gpt2|llama|qwen2|mistral, --preset). With no arguments it
// runs all three on the built-in task and prints what each achieved:
//
//   fathom-chat [--step 1|2|3|all] [--data pairs.jsonl] [--out DIR] [--ppo-iterations N] ...
//
// Under `mpirun -np N` (or the fathom launcher) every step trains data-parallel on N ranks; rank
// 0 prints and writes. One rank's error ends the job with its message. docs/rlhf.md.
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/threads.h"
#include "apps/job_errors.h"
#include "apps/chat/chat_steps.h"

using namespace fathom;

namespace {

int run(const apps::ChatOptions& given, const parallel::Runtime& runtime) {
  apps::ChatOptions options = given;
  if (options.threads > 0) set_num_threads(options.threads);
  // The built-in task's answers are four digits and "\n"; a file's are longer.
  if (options.ppo.sampling.max_new_tokens == 0) options.ppo.sampling.max_new_tokens = options.builtin_data() ? 5 : 64;
  if (options.builtin_data()) options.ppo.sampling.end_token = '\n';

  models::ModelSpec model = models::ModelSpec::preset(options.arch, options.preset);
  if (options.vocab_size) model.set_vocab_size(options.vocab_size);
  apps::ChatConfigs configs = apps::load_chat_configs(options, runtime.size());
  apps::StepSizes needed;
  needed.sft = options.sft_steps * configs.sft.batch.train_batch_size +
               (options.ptx ? options.ppo_iterations * configs.actor.batch.train_batch_size : 0);
  needed.reward = options.reward_steps * configs.reward.batch.train_batch_size;
  needed.ppo = options.ppo_iterations * configs.actor.batch.train_batch_size;
  apps::ChatSummary summary((std::filesystem::path(options.out_dir) / "summary.json").string());
  apps::ChatData data = apps::load_chat_data(options, needed);
  const int64_t pad = apps::pad_token(data, model.vocab_size());
  options.ppo.sampling.pad_token = pad;
  apps::ChatRun chat{options, runtime, model, std::move(configs), std::move(data), summary, options.out_dir, pad};
  if (options.runs(1)) apps::run_sft(chat);
  if (options.runs(2)) apps::run_reward_model(chat);
  if (options.runs(3)) apps::run_ppo(chat);
  if (runtime.is_main_process()) {
    summary.save();
    std::printf("fathom-chat: what each step achieved on %zu held-out prompts (figures in %s/summary.json):\n%s",
                chat.data.held_out.size(), options.out_dir.c_str(), summary.table().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  return apps::run_reporting_errors(runtime, [&] {
    const apps::ChatOptions options = apps::parse_chat_options(argc, argv);
    if (options.help) {
      if (runtime.is_main_process()) std::cout << apps::chat_usage();
      return 0;
    }
    return run(options, runtime);
  });
}
