#pragma once
// The losses of RLHF's training steps, as DeepSpeed-Chat defines them (its step 2 reward model
// and step 3 PPO trainer), on autograd variables so that their gradients flow into the models.
//
// Shapes: (N, T) per-token values for N sequences of T positions. `mask` is 1 where a position
// counts (the generated response tokens) and 0 elsewhere, in the values' dtype.

#include <cstdint>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace fathom::nn {

// log p(tokens[n, t]) under logits[n, t, :] (a softmax over the last dim): the per-token
// log-probs PPO needs from the actor and the reference model. logits (N, T, V), tokens (N, T)
// i64 -> (N, T), differentiable in the logits (gradient one_hot - softmax per position).
autograd::Variable token_logprobs(const autograd::Variable& logits, const Tensor& tokens);

// log(1 + e^x), stable for any x, with gradient sigmoid(x) (exactly 1/2 at 0).
autograd::Variable softplus(const autograd::Variable& x);

// PPO's clipped policy loss (DeepSpeed-Chat's actor_loss_fn): with ratio = exp((logprobs -
// old_logprobs) * mask), sum(max(-A * ratio, -A * clamp(ratio, 1 - cliprange, 1 + cliprange))
// * mask) / sum(mask). Where the ratio is inside the clip range the two terms are equal and
// the gradient is -A * ratio; outside it, on the side the clip guards, it is 0.
autograd::Variable ppo_policy_loss(const autograd::Variable& logprobs, const Tensor& old_logprobs,
                                   const Tensor& advantages, const Tensor& mask, double cliprange);

// PPO's clipped value loss (DeepSpeed-Chat's critic_loss_fn): with values clipped to
// old_values +- cliprange_value, 0.5 * sum(max((values - returns)^2, (clipped - returns)^2) *
// mask) / sum(mask).
autograd::Variable ppo_value_loss(const autograd::Variable& values, const Tensor& old_values, const Tensor& returns,
                                  const Tensor& mask, double cliprange_value);

// The reward model's pairwise loss (DeepSpeed-Chat's RewardModel.forward) over N pairs of
// sequences (prompt + response, right-padded with pad_id) and the value head's per-token
// rewards for each. For pair i: c = the first pad position of the chosen sequence (T if none),
// r = the same for the rejected one, d = the first position where the two sequences differ,
// and the pair's loss is the mean of -log sigmoid(chosen_t - rejected_t) over t in
// [d, max(c, r)). Identical sequences use their last position only. The loss is the mean over
// pairs; each sequence's score is its reward at its last token (c - 1, r - 1).
struct RewardPairLoss {
  autograd::Variable loss;
  Tensor chosen_scores, rejected_scores;  // (N,), f32, no gradient
};
RewardPairLoss reward_pair_loss(const autograd::Variable& chosen_rewards, const autograd::Variable& rejected_rewards,
                                const Tensor& chosen_ids, const Tensor& rejected_ids, int64_t pad_id);

}  // namespace fathom::nn
