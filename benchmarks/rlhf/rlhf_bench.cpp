// Fathom's PPO iteration on the CPU, for the same shapes and hyperparameters as the TRL peer
// (trl_ppo.py): DeepSpeed-Chat's four engines (actor through the hybrid engine, reference,
// critic, reward model; randomly initialised GPT-2-shaped decoders), prompts of random bytes, exactly
// --response-len new tokens per prompt. Reports the means over --iterations timed iterations
// (after --warmup) of generation and training (experience forwards, GAE, the epochs) seconds,
// and generated tokens/s with the key/value cache (the hybrid engine's generation) and without
// it (each new token a full forward over the sequence so far, as a model without a cache runs).
//
//   fathom_rlhf_bench --n-layer 4 --n-head 4 --n-embd 256 --vocab 256 --block-size 128 --batch 16
//                     --prompt-len 10 --response-len 16 --ppo-epochs 1 [--whiten] --iterations 5
//                     --warmup 1 --threads 2 [--bf16] [--json]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "autograd/grad_mode.h"
#include "core/shape_ops.h"
#include "core/threads.h"
#include "engine/initialize.h"
#include "engine/rlhf/ppo_iteration.h"
#include "models/generation.h"
#include "models/reward_model.h"
#include "parallel/local_communicator.h"

using namespace fathom;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

bool bf16 = false;  // --bf16: every engine in bf16 with fp32 master weights

Config engine_config(double lr) {
  return Config::from_string(R"({"train_micro_batch_size_per_gpu": 1, "steps_per_print": 1000000,
      "optimizer": {"type": "AdamW", "params": {"lr": )" + std::to_string(lr) + R"(, "weight_decay": 0.0}},
      "bf16": {"enabled": )" + (bf16 ? "true" : "false") + R"(}, "hybrid_engine": {"enabled": true}})");
}

// Sampling without a cache: every new token a forward over the whole sequence so far.
double tokens_per_second_without_cache(models::Decoder& model, const Tensor& prompts, int64_t new_tokens, Generator& gen) {
  autograd::NoGradGuard no_grad;
  const int64_t B = prompts.size(0);
  Tensor sequences = prompts;
  const Clock::time_point start = Clock::now();
  for (int64_t t = 0; t < new_tokens; ++t) {
    const int64_t T = sequences.size(1);
    const Tensor logits = model(autograd::Variable(sequences)).data().narrow(1, T - 1, 1).contiguous();
    std::vector<int64_t> next(B);
    for (int64_t b = 0; b < B; ++b)
      next[b] = models::sample_token(logits.select(0, b).reshape({logits.size(2)}).contiguous(), 1.0, 0, gen);
    sequences = cat({sequences, Tensor::from_vector(next, {B, 1})}, 1);
  }
  return static_cast<double>(B * new_tokens) / seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, double> a = {{"--n-layer", 4}, {"--n-head", 4},     {"--n-embd", 256},  {"--vocab", 256},
                                     {"--block-size", 128}, {"--batch", 16}, {"--prompt-len", 10},
                                     {"--response-len", 16}, {"--ppo-epochs", 1}, {"--iterations", 5},
                                     {"--warmup", 1}, {"--threads", 2}, {"--lr-actor", 5e-4}, {"--lr-critic", 1e-3}};
  bool whiten = false, json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--whiten") whiten = true;
    else if (arg == "--bf16") bf16 = true;
    else if (arg == "--json") json = true;
    else if (a.count(arg) && i + 1 < argc) a[arg] = std::atof(argv[++i]);
    else return std::fprintf(stderr, "fathom_rlhf_bench: unknown or incomplete option %s\n", arg.c_str()), 2;
  }
  set_num_threads(static_cast<int>(a["--threads"]));
  models::ModelSpec c;  // GPT-2's configuration of the decoder
  c.decoder = models::DecoderConfig::gpt2(static_cast<int64_t>(a["--n-layer"]), static_cast<int64_t>(a["--n-head"]),
                                          static_cast<int64_t>(a["--n-embd"]), static_cast<int64_t>(a["--vocab"]),
                                          static_cast<int64_t>(a["--block-size"]));
  const int64_t B = static_cast<int64_t>(a["--batch"]), P = static_cast<int64_t>(a["--prompt-len"]);
  const int64_t L = static_cast<int64_t>(a["--response-len"]);
  const int iterations = static_cast<int>(a["--iterations"]), warmup = static_cast<int>(a["--warmup"]);

  const auto groups = parallel::ProcessGroups::data_parallel(std::make_shared<parallel::LocalCommunicator>());
  auto actor = std::make_shared<models::Decoder>(c.decoder, 1);
  HybridEngine hybrid(initialize(engine_config(a["--lr-actor"]), actor).engine, engine_config(0).hybrid_engine);
  const auto reference = initialize_for_evaluation(engine_config(0), std::make_shared<models::Decoder>(c.decoder, 1), groups);
  const auto critic = initialize(engine_config(a["--lr-critic"]), std::make_shared<models::RewardModel>(c, 2)).engine;
  const auto reward = initialize_for_evaluation(engine_config(0), std::make_shared<models::RewardModel>(c, 2), groups);
  PpoEngines engines{hybrid, *reference, *critic, *reward};
  PpoOptions options;
  options.ppo_epochs = static_cast<int>(a["--ppo-epochs"]);
  options.whiten_advantages = whiten;
  options.sampling.max_new_tokens = L;  // no end token: every row generates L tokens

  Generator data(7), gen(8);
  double generation = 0, training = 0, total = 0;
  for (int i = 0; i < warmup + iterations; ++i) {
    const Tensor prompts = randint({B, P}, data, 1, c.vocab_size());
    const Clock::time_point start = Clock::now();
    const PpoIterationStats stats = ppo_iteration(engines, prompts, options, gen);
    const double seconds = seconds_since(start);
    if (i < warmup) continue;
    generation += stats.generation_seconds / iterations, training += stats.training_seconds / iterations;
    total += seconds / iterations;
  }
  const Tensor prompts = randint({B, P}, data, 1, c.vocab_size());
  const double no_cache = tokens_per_second_without_cache(*actor, prompts, L, gen);
  const double with_cache = static_cast<double>(B * L) / generation;
  std::fprintf(stderr, "Fathom PPO iteration (%lld layers, %lld wide, batch %lld, %lld + %lld tokens, %d epoch(s)): "
               "generation %.1f ms, training %.1f ms, iteration %.1f ms; %.0f tokens/s with the cache, %.0f without\n",
               static_cast<long long>(c.decoder.n_layer), static_cast<long long>(c.hidden_size()), static_cast<long long>(B),
               static_cast<long long>(P), static_cast<long long>(L), options.ppo_epochs, generation * 1e3,
               training * 1e3, total * 1e3, with_cache, no_cache);
  if (json)
    std::printf("{\"peer\": \"fathom\", \"threads\": %d, \"batch\": %lld, \"prompt_len\": %lld, \"response_len\": %lld, "
                "\"ppo_epochs\": %d, \"whiten\": %s, \"precision\": \"%s\", \"iterations\": %d, \"generation_s\": %.6f, \"training_s\": %.6f, "
                "\"iteration_s\": %.6f, \"tokens_per_s_cache\": %.1f, \"tokens_per_s_no_cache\": %.1f, \"parameters\": %lld}\n",
                static_cast<int>(a["--threads"]), static_cast<long long>(B), static_cast<long long>(P),
                static_cast<long long>(L), options.ppo_epochs, whiten ? "true" : "false", bf16 ? "bf16" : "f32", iterations, generation,
                training, total, with_cache, no_cache, static_cast<long long>(actor->parameter_count()));
  return 0;
}
