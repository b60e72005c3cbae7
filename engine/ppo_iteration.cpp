#include "engine/ppo_iteration.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "kernels/reduction.h"
#include "nn/rlhf_loss.h"

namespace fathom {
namespace {

using autograd::Variable;

// The last L columns of a (B, T) variable: the response positions.
Variable response_columns(const Variable& x, int64_t L) {
  const int64_t T = x.size(1);
  if (T == L) return x;
  return autograd::split(x, {T - L, L}, 1)[1];
}

// log pi(token) of each response token: the logits at positions P - 1 .. P + L - 2 predict
// the tokens at P .. P + L - 1.
Variable response_logprobs(models::GPT& model, const Tensor& sequences, int64_t L) {
  const int64_t T = sequences.size(1);
  const Tensor inputs = sequences.narrow(1, 0, T - 1).contiguous(), targets = sequences.narrow(1, 1, T - 1).contiguous();
  return response_columns(nn::token_logprobs(model(Variable(inputs)), targets), L);
}

// The critic's value of the state before each response token (positions P - 1 .. P + L - 2).
Variable response_values(models::RewardModel& critic, const Tensor& sequences, int64_t L) {
  const int64_t T = sequences.size(1);
  return response_columns(critic(Variable(sequences.narrow(1, 0, T - 1).contiguous())), L);
}

double mean_over(const Tensor& x, const Tensor& mask) {
  return sum(mul(x, mask)).item() / sum(mask).item();
}

}  // namespace

PpoIterationStats ppo_iteration(PpoModels& m, const Tensor& prompts, const PpoOptions& options, Generator& gen) {
  FATHOM_CHECK(options.ppo_epochs >= 1, "ppo_iteration: ppo_epochs ", options.ppo_epochs, " must be >= 1");
  PpoIterationStats stats;
  stats.generated = models::generate(m.actor, prompts, options.sampling, gen);
  const Tensor& sequences = stats.generated.sequences;
  const Tensor& mask = stats.generated.mask;
  const int64_t B = sequences.size(0), L = mask.size(1), P = prompts.size(1);

  // Experience: everything the losses compare against, without gradients.
  Tensor old_logprobs, ref_logprobs, old_values, scores;
  {
    autograd::NoGradGuard no_grad;
    old_logprobs = response_logprobs(m.actor, sequences, L).data();
    ref_logprobs = response_logprobs(m.reference, sequences, L).data();
    old_values = response_values(m.critic, sequences, L).data();
    // The reward model scores each sequence at its last generated token.
    const std::vector<float> mask_host = mask.to_vector<float>();
    const std::vector<float> rewards =
        m.reward(Variable(sequences)).data().to(DType::F32).to_vector<float>();
    std::vector<float> last(B);
    for (int64_t b = 0; b < B; ++b) {
      int64_t length = 0;
      while (length < L && mask_host[b * L + length] != 0) ++length;
      last[b] = rewards[b * (P + L) + P + std::max<int64_t>(length, 1) - 1];
    }
    scores = Tensor::from_vector(last, {B});
  }
  stats.mean_score = sum(scores).item() / static_cast<double>(B);
  stats.mean_kl = mean_over(sub(old_logprobs, ref_logprobs), mask);
  const Tensor rewards = ppo_rewards(old_logprobs, ref_logprobs, scores, mask, options.coefficients);
  AdvantagesAndReturns targets = ppo_advantages(old_values, rewards, mask, options.coefficients);
  if (options.whiten_advantages) targets.advantages = whiten(targets.advantages, mask);

  for (int epoch = 0; epoch < options.ppo_epochs; ++epoch) {
    m.actor_optimizer.zero_grad();
    const Variable actor_loss = nn::ppo_policy_loss(response_logprobs(m.actor, sequences, L), old_logprobs,
                                                    targets.advantages, mask, options.cliprange);
    actor_loss.backward();
    m.actor_optimizer.step();
    m.critic_optimizer.zero_grad();
    const Variable critic_loss = nn::ppo_value_loss(response_values(m.critic, sequences, L), old_values,
                                                    targets.returns, mask, options.cliprange_value);
    critic_loss.backward();
    m.critic_optimizer.step();
    stats.actor_loss = actor_loss.data().item();
    stats.critic_loss = critic_loss.data().item();
  }
  return stats;
}

}  // namespace fathom
