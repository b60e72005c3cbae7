#include "apps/chat/chat_steps.h"

#include <cstdio>
#include <functional>

#include "autograd/nn_functions.h"
#include "core/json.h"
#include "core/json_writer.h"
#include "core/shape_ops.h"
#include "engine/initialize.h"
#include "engine/rlhf/batches.h"
#include "nn/loss.h"
#include "nn/rlhf_loss.h"
#include "nn/safetensors.h"

namespace fathom::apps {
namespace fs = std::filesystem;
using autograd::Variable;

namespace {

// The built-in configs: DeepSpeed-Chat's shape (AdamW, clipping 1.0, one micro-batch per step)
// with learning rates for the tiny byte-level models fathom-chat trains by default.
constexpr const char* kSupervisedConfig = R"({"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
  "steps_per_print": 50, "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.0}}})";  // SFT and reward model
constexpr const char* kActorConfig = R"({"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
  "steps_per_print": 1000000, "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 5e-4, "weight_decay": 0.0}},
  "hybrid_engine": {"enabled": true, "max_out_tokens": 512}})";
constexpr const char* kCriticConfig = R"({"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
  "steps_per_print": 1000000, "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.0}}})";

Config step_config(const std::string& path, const char* builtin, int world) {
  Config config = path.empty() ? Config::from_string(builtin, ConfigFormat::Json) : Config::from_file(path);
  config.resolve_batch(world);
  return config;
}

void say(const ChatRun& run, const std::string& line) {
  if (run.runtime.is_main_process()) std::printf("fathom-chat: %s\n", line.c_str()), std::fflush(stdout);
}

std::string fixed(double value, int digits = 3) {
  char out[32];
  std::snprintf(out, sizeof out, "%.*f", digits, value);
  return out;
}

// A step's input from an earlier one: the file, or an error that says how to make it.
std::string require_file(const fs::path& path, const std::string& what) {
  FATHOM_CHECK(fs::exists(path), "fathom-chat: ", what, " ", path.string(), " does not exist; run that step first "
               "(fathom-chat --step N --out ", path.parent_path().parent_path().string(), ")");
  return path.string();
}

void checkpoint_if_due(Engine& engine, const fs::path& dir, int64_t done, int64_t interval, int64_t total,
                       const std::string& client_state = "{}") {
  if (done == total || (interval > 0 && done % interval == 0)) engine.save_checkpoint(dir.string(), "", client_state);
}

// `steps` optimizer steps of `engine`, each of gradient_accumulation_steps micro-batches;
// `loss(start, size)` is the loss of the micro-batch of `size` pairs from position `start` of the
// step's data (each rank its own micro-batches of every global batch).
void train_steps(const ChatRun& run, Engine& engine, const Config& config, int64_t steps, const fs::path& checkpoints,
                 const std::function<Variable(int64_t start, int64_t size)>& loss) {
  const int64_t mb = config.batch.train_micro_batch_size_per_gpu, gas = config.batch.gradient_accumulation_steps;
  for (int64_t step = 0; step < steps; ++step) {
    for (int64_t m = 0; m < gas; ++m) {
      engine.backward(loss(((step * gas + m) * run.runtime.size() + run.runtime.rank()) * mb, mb));
      engine.step();
    }
    checkpoint_if_due(engine, checkpoints, step + 1, run.options.save_interval, steps);
  }
}

// The actor of the run's architecture: its weights from a Hugging Face folder (an SFT or PPO
// result), or from an engine's consolidated state dict.
std::shared_ptr<models::Decoder> chat_actor(const models::ModelSpec& spec, uint64_t seed) {
  return std::static_pointer_cast<models::Decoder>(spec.build(seed));
}
std::shared_ptr<models::Decoder> load_actor(const models::ModelSpec& spec, uint64_t seed, const std::string& path) {
  auto model = chat_actor(spec, seed);
  spec.load(*model, path);
  return model;
}
std::shared_ptr<models::Decoder> actor_from(const models::ModelSpec& spec, uint64_t seed, const nn::NamedTensors& weights) {
  auto model = chat_actor(spec, seed);
  model->load_state_dict(weights);
  return model;
}

// A reward model from step 2's weights (Fathom's names: the backbone's model.* and v_head.weight).
std::shared_ptr<models::RewardModel> reward_model_from(const models::ModelSpec& spec, uint64_t seed,
                                                       const nn::NamedTensors& weights) {
  auto model = std::make_shared<models::RewardModel>(spec, seed);
  model->load_state_dict(weights);
  return model;
}
std::shared_ptr<models::RewardModel> load_reward_model(const models::ModelSpec& spec, uint64_t seed,
                                                       const std::string& path) {
  nn::NamedTensors weights;
  for (auto& [name, tensor] : nn::load_safetensors(path)) weights.emplace_back(name, tensor);
  return reward_model_from(spec, seed, weights);
}

void record_policy(ChatRun& run, const std::string& step, const PolicyEvaluation& e) {
  run.summary.set(step + ".score", e.score);
  run.summary.set(step + ".sortedness", e.sortedness);
  run.summary.set(step + ".digits_kept", e.digits_kept);
}

std::string describe(const PolicyEvaluation& e) {
  std::string text;
  if (std::isfinite(e.score)) text += "reward model's mean score " + fixed(e.score);
  if (std::isfinite(e.sortedness))
    text += std::string(text.empty() ? "" : ", ") + "sortedness " + fixed(e.sortedness) + ", digits kept " +
            fixed(e.digits_kept);
  return text;
}

// Iteration `index`'s sampling seed: resumed runs draw what uninterrupted ones do.
uint64_t stream_seed(uint64_t seed, int64_t index) {
  return seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(index + 1));
}

}  // namespace

ChatConfigs load_chat_configs(const ChatOptions& o, int world) {
  return {step_config(o.sft_config, kSupervisedConfig, world), step_config(o.reward_config, kSupervisedConfig, world),
          step_config(o.actor_config, kActorConfig, world), step_config(o.critic_config, kCriticConfig, world)};
}

void run_sft(ChatRun& run) {
  const ChatOptions& o = run.options;
  const Config& config = run.configs.sft;
  const fs::path dir = run.out / "step1";
  auto actor = o.actor_init.empty() ? chat_actor(run.model, o.seed) : load_actor(run.model, o.seed, o.actor_init);
  const auto engine = initialize(config, actor, nullptr, nullptr, run.runtime.world_ptr()).engine;
  say(run, "step 1 (SFT): " + std::to_string(o.sft_steps) + " steps of " +
               std::to_string(config.batch.train_batch_size) + " prompt -> response pairs");
  train_steps(run, *engine, config, o.sft_steps, dir / "checkpoints", [&](int64_t start, int64_t size) {
    const SftBatch batch = sft_batch(cyclic_slice(run.data.sft, start, size), run.max_length(), run.pad);
    return nn::cross_entropy((*engine)(Variable(batch.inputs)), batch.targets);
  });
  const nn::NamedTensors weights = engine->consolidated_state_dict();
  if (run.runtime.is_main_process()) {
    run.model.save(weights, (dir / "actor").string());
  }
  const PolicyEvaluation e = evaluate_policy(*actor_from(run.model, o.seed, weights), nullptr,
                                             run.data.held_out, o.ppo.sampling, o.seed + 4, o.builtin_data());
  run.summary.set("step1.loss", engine->last_report().loss);
  record_policy(run, "step1", e);
  say(run, "step 1 done: loss " + fixed(engine->last_report().loss) +
               (o.builtin_data() ? "; held-out " + describe(e) : std::string()) + "; wrote " +
               (dir / "actor").string());
}

void run_reward_model(ChatRun& run) {
  const ChatOptions& o = run.options;
  const Config& config = run.configs.reward;
  const fs::path dir = run.out / "step2";
  const std::string sft_path = require_file(run.out / "step1" / "actor", "step 1's actor");
  const auto sft = load_actor(run.model, o.seed, sft_path);
  auto reward = std::make_shared<models::RewardModel>(run.model, o.seed + 1);
  reward->load_backbone(*sft);
  const auto engine = initialize(config, reward, nullptr, nullptr, run.runtime.world_ptr()).engine;
  say(run, "step 2 (reward model): " + std::to_string(o.reward_steps) + " steps of " +
               std::to_string(config.batch.train_batch_size) + " chosen / rejected pairs");
  train_steps(run, *engine, config, o.reward_steps, dir / "checkpoints", [&](int64_t start, int64_t size) {
    const RewardBatch batch = reward_batch(cyclic_slice(run.data.reward, start, size), run.max_length(), run.pad);
    // Chosen and rejected through one forward, as DeepSpeed-Chat's reward model does.
    const autograd::VariableList rewards =
        autograd::split((*engine)(Variable(cat({batch.chosen, batch.rejected}, 0))), {size, size}, 0);
    return nn::reward_pair_loss(rewards[0], rewards[1], batch.chosen, batch.rejected, run.pad).loss;
  });
  const nn::NamedTensors weights = engine->consolidated_state_dict();
  if (run.runtime.is_main_process()) {
    fs::create_directories(dir);
    nn::save_safetensors((dir / "reward_model.safetensors").string(), weights);
  }
  const auto trained = reward_model_from(run.model, o.seed + 1, weights);
  const double accuracy = reward_accuracy(*trained, run.data.held_out, run.max_length(), run.pad);
  // The SFT actor judged by the new reward model: what step 3 starts from.
  const PolicyEvaluation start = evaluate_policy(*sft, trained.get(), run.data.held_out, o.ppo.sampling, o.seed + 4,
                                                 o.builtin_data());
  run.summary.set("step2.loss", engine->last_report().loss);
  run.summary.set("step2.accuracy", accuracy);
  run.summary.set("step2.sft_score", start.score);
  say(run, "step 2 done: loss " + fixed(engine->last_report().loss) + ", held-out accuracy " + fixed(accuracy) +
               " (chosen scored above rejected); the SFT actor, judged by it: " + describe(start) + "; wrote " +
               (dir / "reward_model.safetensors").string());
}

void run_ppo(ChatRun& run) {
  const ChatOptions& o = run.options;
  const fs::path dir = run.out / "step3";
  const fs::path saved = dir / "actor_checkpoints";
  FATHOM_CHECK(!o.resume || fs::exists(saved / "latest"), "fathom-chat --resume: no checkpoint in ", saved.string(),
               " (its \"latest\" file is missing); run step 3 without --resume first");
  const std::string actor_path = require_file(run.out / "step1" / "actor", "step 1's actor");
  const std::string reward_path = require_file(run.out / "step2" / "reward_model.safetensors", "step 2's reward model");
  const auto groups = parallel::ProcessGroups::data_parallel(run.runtime.world_ptr());
  const auto actor_engine = initialize(run.configs.actor, load_actor(run.model, o.seed, actor_path), nullptr, nullptr, groups).engine;
  const auto critic_engine =
      initialize(run.configs.critic, load_reward_model(run.model, o.seed + 1, reward_path), nullptr, nullptr, groups).engine;
  const auto reference_engine = initialize_for_evaluation(run.configs.actor, load_actor(run.model, o.seed, actor_path), groups);
  const auto reward_engine =
      initialize_for_evaluation(run.configs.critic, load_reward_model(run.model, o.seed + 1, reward_path), groups);
  HybridEngine actor(actor_engine, run.configs.actor.hybrid_engine);
  PpoEngines engines{actor, *reference_engine, *critic_engine, *reward_engine};

  const int64_t mb = run.configs.actor.batch.train_micro_batch_size_per_gpu;
  FATHOM_CHECK(run.configs.critic.batch.train_micro_batch_size_per_gpu == mb, "fathom-chat: the actor's and the "
               "critic's configs must have the same train_micro_batch_size_per_gpu (they train on the same "
               "experience), got ", mb, " and ", run.configs.critic.batch.train_micro_batch_size_per_gpu);
  const auto batches = same_length_batches(run.data.ppo, mb, run.model.max_positions() - o.ppo.sampling.max_new_tokens);
  FATHOM_CHECK(!batches.empty(), "fathom-chat: step 3 has no batch of ", mb, " prompts of one length that leave room "
               "for ", o.ppo.sampling.max_new_tokens, " new tokens in the model's ", run.model.max_positions(), " positions",
               "; lower train_micro_batch_size_per_gpu or --max-new-tokens, or give more prompts");

  int64_t start = 0;
  if (o.resume) {
    const JsonValue state = parse_json(actor_engine->load_checkpoint(saved.string()), "step 3's client state");
    critic_engine->load_checkpoint((dir / "critic_checkpoints").string());
    const JsonValue* iteration = state.find("iteration");
    FATHOM_CHECK(iteration && iteration->is_integer(), "fathom-chat --resume: the checkpoint in ", saved.string(),
                 " has no \"iteration\" in its client state; it was not written by fathom-chat's step 3");
    start = iteration->as_int64();
    say(run, "step 3 resumes after iteration " + std::to_string(start));
  }
  say(run, "step 3 (PPO): " + std::to_string(o.ppo_iterations) + " iterations of " + std::to_string(mb) + " x " +
               std::to_string(run.runtime.size()) + " prompts, " + std::to_string(o.ppo.ppo_epochs) + " epoch(s) each");
  PpoIterationStats stats;
  double generation_seconds = 0, training_seconds = 0;
  for (int64_t k = start; k < o.ppo_iterations; ++k) {
    const int64_t index = k * run.runtime.size() + run.runtime.rank();
    Generator gen(stream_seed(o.seed, index));
    std::optional<SftBatch> unsupervised;
    if (o.ptx) unsupervised = sft_batch(cyclic_slice(run.data.sft, index * mb, mb), run.max_length(), run.pad);
    stats = ppo_iteration(engines, prompt_batch(batches[static_cast<size_t>(index) % batches.size()]), o.ppo, gen,
                          unsupervised);
    generation_seconds += stats.generation_seconds;
    training_seconds += stats.training_seconds;
    if ((k + 1) % o.print_interval == 0 || k + 1 == o.ppo_iterations)
      say(run, "ppo iteration " + std::to_string(k + 1) + "/" + std::to_string(o.ppo_iterations) + " | score " +
                   fixed(stats.mean_score) + " | kl " + fixed(stats.mean_kl, 4) + " | actor loss " +
                   fixed(stats.actor_loss, 4) + " | critic loss " + fixed(stats.critic_loss, 4) + " | generation " +
                   fixed(stats.generation_seconds * 1e3, 1) + " ms | training " + fixed(stats.training_seconds * 1e3, 1) + " ms");
    JsonWriter client(JsonWriter::Layout::Inline);
    client.begin_object().member("iteration", static_cast<long long>(k + 1)).end_object();
    checkpoint_if_due(*actor_engine, dir / "actor_checkpoints", k + 1, o.save_interval, o.ppo_iterations, client.str());
    checkpoint_if_due(*critic_engine, dir / "critic_checkpoints", k + 1, o.save_interval, o.ppo_iterations, client.str());
  }
  const nn::NamedTensors actor_weights = actor_engine->consolidated_state_dict();
  const nn::NamedTensors critic_weights = critic_engine->consolidated_state_dict();
  if (run.runtime.is_main_process()) {
    fs::create_directories(dir);
    run.model.save(actor_weights, (dir / "actor").string());
    nn::save_safetensors((dir / "critic.safetensors").string(), critic_weights);
  }
  const auto judge = load_reward_model(run.model, o.seed + 1, reward_path);
  const PolicyEvaluation e = evaluate_policy(*actor_from(run.model, o.seed, actor_weights), judge.get(),
                                             run.data.held_out, o.ppo.sampling, o.seed + 4, o.builtin_data());
  record_policy(run, "step3", e);
  const int64_t ran = o.ppo_iterations - start;
  run.summary.set("step3.iterations", static_cast<double>(o.ppo_iterations));
  if (ran > 0) {
    run.summary.set("step3.kl", stats.mean_kl);
    run.summary.set("step3.generation_s", generation_seconds / ran);
    run.summary.set("step3.training_s", training_seconds / ran);
  }
  say(run, "step 3 done: held-out " + describe(e) + "; wrote " + (dir / "actor").string() + " and critic.safetensors");
}

}  // namespace fathom::apps
