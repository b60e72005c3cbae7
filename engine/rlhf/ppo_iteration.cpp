#include "engine/rlhf/ppo_iteration.h"

#include <chrono>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "kernels/reduction.h"
#include "nn/loss.h"
#include "nn/rlhf_loss.h"

namespace fathom {
namespace {

using autograd::Variable;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The last L columns of a (B, T) variable: the response positions.
Variable response_columns(const Variable& x, int64_t L) {
  const int64_t T = x.size(1);
  if (T == L) return x;
  return autograd::split(x, {T - L, L}, 1)[1];
}

Tensor all_but_last(const Tensor& sequences) { return sequences.narrow(1, 0, sequences.size(1) - 1).contiguous(); }

// log pi(token) of each response token: the logits at positions P - 1 .. P + L - 2 predict
// the tokens at P .. P + L - 1. In f32 whatever the model's dtype (the losses and GAE are).
Variable response_logprobs(Engine& model, const Tensor& sequences, int64_t L) {
  const Tensor targets = sequences.narrow(1, 1, sequences.size(1) - 1).contiguous();
  const Variable logits = autograd::to_dtype(model(Variable(all_but_last(sequences))), DType::F32);
  return response_columns(nn::token_logprobs(logits, targets), L);
}

// The critic's value of the state before each response token (positions P - 1 .. P + L - 2).
Variable response_values(Engine& critic, const Tensor& sequences, int64_t L) {
  return response_columns(autograd::to_dtype(critic(Variable(all_but_last(sequences))), DType::F32), L);
}

double mean_over(const Tensor& x, const Tensor& mask) {
  return sum(mul(x, mask)).item() / sum(mask).item();
}

}  // namespace

PpoIterationStats ppo_iteration(PpoEngines& e, const Tensor& prompts, const PpoOptions& options, Generator& gen,
                                const std::optional<SftBatch>& unsupervised) {
  FATHOM_CHECK(options.ppo_epochs >= 1, "ppo_iteration: ppo_epochs ", options.ppo_epochs, " must be >= 1");
  for (Engine* trained : {&e.actor.engine(), &e.critic})
    FATHOM_CHECK(trained->options().gradient_accumulation_steps == 1,
                 "ppo_iteration: each PPO epoch is one optimizer step of the actor and of the critic, so their "
                 "configs need gradient_accumulation_steps 1 (got ",
                 trained->options().gradient_accumulation_steps, ")");
  PpoIterationStats stats;
  Clock::time_point start = Clock::now();
  stats.generated = e.actor.generate(prompts, options.sampling, gen);
  stats.generation_seconds = seconds_since(start);
  start = Clock::now();
  const Tensor& sequences = stats.generated.sequences;
  const Tensor& mask = stats.generated.mask;
  const int64_t L = mask.size(1), P = prompts.size(1);

  // Experience: everything the losses compare against. The actor's log-probs and the critic's
  // values come from epoch 0's own forward passes, whose weights are still the ones that
  // generated (DeepSpeed-Chat runs those forwards twice); the rest without gradients.
  Variable logprobs = response_logprobs(e.actor.engine(), sequences, L);
  Variable values = response_values(e.critic, sequences, L);
  const Tensor old_logprobs = logprobs.data(), old_values = values.data();
  Tensor ref_logprobs, scores;
  {
    autograd::NoGradGuard no_grad;
    ref_logprobs = response_logprobs(e.reference, sequences, L).data();
    scores = models::last_token_values(e.reward(Variable(sequences)).data(), stats.generated, P);
  }
  stats.mean_score = mean(scores).item();
  stats.mean_kl = mean_over(sub(old_logprobs, ref_logprobs), mask);
  const Tensor rewards = ppo_rewards(old_logprobs, ref_logprobs, scores, mask, options.coefficients);
  AdvantagesAndReturns targets = ppo_advantages(old_values, rewards, mask, options.coefficients);
  if (options.whiten_advantages) targets.advantages = whiten(targets.advantages, mask);

  for (int epoch = 0; epoch < options.ppo_epochs; ++epoch) {
    if (epoch > 0) logprobs = response_logprobs(e.actor.engine(), sequences, L);
    const Variable actor_loss = nn::ppo_policy_loss(logprobs, old_logprobs, targets.advantages, mask, options.cliprange);
    e.actor.engine().backward(actor_loss);
    e.actor.engine().step();
    if (epoch > 0) values = response_values(e.critic, sequences, L);
    const Variable critic_loss = nn::ppo_value_loss(values, old_values, targets.returns, mask, options.cliprange_value);
    e.critic.backward(critic_loss);
    e.critic.step();
    if (unsupervised) {  // DeepSpeed-Chat's ptx: a step on the SFT loss, weighted by unsup_coef
      const Variable sft = nn::cross_entropy(e.actor.engine()(Variable(unsupervised->inputs)), unsupervised->targets);
      e.actor.engine().backward(autograd::mul(sft, options.unsup_coef));
      e.actor.engine().step();
    }
    stats.actor_loss = actor_loss.data().item();
    stats.critic_loss = critic_loss.data().item();
  }
  stats.training_seconds = seconds_since(start);
  return stats;
}

}  // namespace fathom
