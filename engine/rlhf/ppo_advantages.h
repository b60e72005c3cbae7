#pragma once
// The experience side of PPO as DeepSpeed-Chat's step 3 computes it: per-token rewards shaped
// by the KL to the reference model, then advantages and returns by generalised advantage
// estimation (GAE), optionally whitened (TRL does; DeepSpeed-Chat does not). No gradients flow
// here: these are the fixed targets the losses of nn/rlhf_loss.h train towards.
//
// Every tensor is (N, L): N sequences, L response positions (position t holds the log-prob of
// the t-th generated token, the value before it, ...). `mask` is 1 on generated tokens and 0 on
// the padding after a sequence ended early; it is 1 on a prefix of each row.

#include "core/tensor.h"

namespace fathom {

struct PpoCoefficients {
  double kl_ctl = 0.1;             // weight of the per-token KL penalty (fixed, not adaptive)
  double clip_reward_value = 5.0;  // the reward model's score is clipped to +- this
  double gamma = 1.0;              // discount
  double lam = 0.95;               // GAE's lambda
};

// rewards[i, t] = -kl_ctl * (logprobs - ref_logprobs)[i, t] on generated tokens, plus
// clamp(scores[i], +-clip_reward_value) at row i's last generated token; 0 on padding.
// scores: (N,), the reward model's score of each sequence.
Tensor ppo_rewards(const Tensor& logprobs, const Tensor& ref_logprobs, const Tensor& scores, const Tensor& mask,
                   const PpoCoefficients& c);

struct AdvantagesAndReturns {
  Tensor advantages, returns;  // (N, L), f32
};
// GAE backwards over each row, with values and rewards taken as 0 past the row's end:
// delta_t = r_t + gamma * V_{t+1} - V_t, A_t = delta_t + gamma * lam * A_{t+1},
// returns = A + V.
AdvantagesAndReturns ppo_advantages(const Tensor& values, const Tensor& rewards, const Tensor& mask,
                                    const PpoCoefficients& c);

// (x - mean) / sqrt(var + 1e-8) with mean and (Bessel-corrected) variance over the masked
// positions; masked-out positions come out 0.
Tensor whiten(const Tensor& x, const Tensor& mask);

}  // namespace fathom
