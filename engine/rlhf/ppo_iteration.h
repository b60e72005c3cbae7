#pragma once
// One PPO iteration of RLHF's step 3, as DeepSpeed-Chat runs it: generate responses to a batch
// of prompts with the actor (its hybrid engine); score them with the frozen reward model; take
// the actor's, reference's and critic's view of the same tokens; shape per-token rewards with the
// KL to the reference; advantages and returns by GAE; then ppo_epochs of the clipped policy loss
// (actor) and the clipped value loss (critic), each epoch one optimizer step of each engine;
// optionally ("ptx") a step of the actor on the SFT loss of a supervised batch after each epoch.
//
// Each engine's config must have gradient_accumulation_steps 1 (one backward per step). In a
// job of several data-parallel ranks each rank brings its own prompts; the engines average the
// gradients.

#include <optional>

#include "core/generator.h"
#include "engine/engine.h"
#include "engine/rlhf/hybrid_engine.h"
#include "engine/rlhf/ppo_advantages.h"
#include "engine/rlhf/batches.h"
#include "models/generation.h"

namespace fathom {

struct PpoEngines {
  HybridEngine& actor;  // trained (from the SFT model); generates
  Engine& reference;    // frozen copy of the SFT model (initialize_for_evaluation)
  Engine& critic;       // trained (from the reward model); a models::RewardModel
  Engine& reward;       // frozen reward model (initialize_for_evaluation)
};

struct PpoOptions {
  PpoCoefficients coefficients;   // kl_ctl, clip_reward_value, gamma, lam
  double cliprange = 0.2;         // policy ratio clip
  double cliprange_value = 0.2;   // value clip
  int ppo_epochs = 1;
  bool whiten_advantages = false;  // TRL whitens; DeepSpeed-Chat does not
  double unsup_coef = 27.8;        // DeepSpeed-Chat's weight of the SFT loss, when a batch is given
  models::SamplingOptions sampling;
};

struct PpoIterationStats {
  double mean_score = 0;    // the reward model's mean score of this rank's generated responses
  double mean_kl = 0;       // mean over generated tokens of log pi - log pi_ref (at generation)
  double actor_loss = 0;    // of the last epoch, this rank's
  double critic_loss = 0;   // of the last epoch, this rank's
  double generation_seconds = 0, training_seconds = 0;  // training: experience and epochs
  models::Generated generated;
};

// prompts: i64 [B, P], all of one length. `unsupervised`: a supervised batch for the ptx term.
PpoIterationStats ppo_iteration(PpoEngines& engines, const Tensor& prompts, const PpoOptions& options, Generator& gen,
                                const std::optional<SftBatch>& unsupervised = std::nullopt);

}  // namespace fathom
