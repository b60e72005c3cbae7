#pragma once
// One PPO iteration of RLHF's step 3, as DeepSpeed-Chat runs it: generate responses to a batch
// of prompts with the actor; score them with the frozen reward model; take the actor's,
// reference's and critic's view of the same tokens; shape per-token rewards with the KL to the
// reference; advantages and returns by GAE; then ppo_epochs of the clipped policy loss (actor)
// and the clipped value loss (critic).
//
// This is the algorithm on plain modules and optimizers; the DeepSpeed engines, the hybrid
// engine's switch between training and generation, and fathom-chat build on it.

#include "core/generator.h"
#include "engine/ppo_advantages.h"
#include "models/generation.h"
#include "models/reward_model.h"
#include "nn/optimizer.h"

namespace fathom {

struct PpoModels {
  models::GPT& actor;
  models::GPT& reference;         // frozen copy of the SFT model (never stepped)
  models::RewardModel& critic;    // starts as the reward model, trained
  models::RewardModel& reward;    // frozen (never stepped)
  nn::Optimizer& actor_optimizer;
  nn::Optimizer& critic_optimizer;
};

struct PpoOptions {
  PpoCoefficients coefficients;   // kl_ctl, clip_reward_value, gamma, lam
  double cliprange = 0.2;         // policy ratio clip
  double cliprange_value = 0.2;   // value clip
  int ppo_epochs = 1;
  bool whiten_advantages = false;  // TRL whitens; DeepSpeed-Chat does not
  models::SamplingOptions sampling;
};

struct PpoIterationStats {
  double mean_score = 0;    // the reward model's mean score of the generated responses
  double mean_kl = 0;       // mean over generated tokens of log pi - log pi_ref (at generation)
  double actor_loss = 0;    // of the last epoch
  double critic_loss = 0;   // of the last epoch
  models::Generated generated;
};

// prompts: i64 [B, P], all of one length.
PpoIterationStats ppo_iteration(PpoModels& models, const Tensor& prompts, const PpoOptions& options, Generator& gen);

}  // namespace fathom
