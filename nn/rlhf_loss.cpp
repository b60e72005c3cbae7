#include "nn/rlhf_loss.h"

#include <algorithm>
#include <vector>

#include "autograd/custom_function.h"
#include "autograd/functions.h"
#include "autograd/nn_functions.h"
#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/reduction.h"

namespace fathom::nn {
namespace {

using autograd::TensorList;
using autograd::Variable;

// max(x, 0) + log(1 + e^-|x|): no overflow anywhere, and one gradient formula (a composition
// of relu and abs would get the gradient at 0 wrong, where untrained reward heads sit).
struct Softplus : autograd::Function {
  std::string name() const override { return "softplus"; }
  TensorList forward(const TensorList& in) override {
    save_for_backward({in[0]});
    return {add(relu(in[0]), log(add(exp(neg(abs(in[0]))), 1.0)))};
  }
  TensorList backward(const TensorList& grads) override { return {mul(grads[0], sigmoid(saved_tensors()[0]))}; }
};

void check_same_shape(const Tensor& a, const Tensor& b, const char* op, const char* a_name, const char* b_name) {
  FATHOM_CHECK(a.sizes() == b.sizes(), op, ": ", a_name, " has shape ", shape_str(a.sizes()), " but ", b_name,
               " has shape ", shape_str(b.sizes()), "; they must match (one value per sequence position)");
}

Variable constant(const Tensor& t) { return Variable(t); }

Variable masked_mean(const Variable& x, const Tensor& mask) {
  const double count = fathom::sum(mask).item();
  FATHOM_CHECK(count > 0, "PPO loss: the mask selects no position (no response tokens in the batch)");
  return autograd::sum(x * constant(mask)) / count;
}

// First position of `value` in row `row` of a (N, T) host vector, or T.
int64_t first_of(const std::vector<int64_t>& ids, int64_t row, int64_t T, int64_t value) {
  for (int64_t t = 0; t < T; ++t)
    if (ids[row * T + t] == value) return t;
  return T;
}

}  // namespace

Variable token_logprobs(const Variable& logits, const Tensor& tokens) {
  const char* op = "token_logprobs";
  FATHOM_CHECK(logits.dim() == 3, op, ": logits must be (sequences, positions, vocab), got shape ",
               shape_str(logits.sizes()));
  FATHOM_CHECK(tokens.dtype() == DType::I64 && tokens.dim() == 2 && tokens.size(0) == logits.size(0) &&
                   tokens.size(1) == logits.size(1),
               op, ": tokens must be i64 of shape [", logits.size(0), ", ", logits.size(1), "], got ",
               dtype_name(tokens.dtype()), " ", shape_str(tokens.sizes()));
  const int64_t V = logits.size(2);
  const Device device = logits.data().device();
  const Tensor vocab = Tensor::arange(V, DType::I64, device);
  const Tensor one_hot = eq(tokens.to(device).reshape({tokens.size(0), tokens.size(1), 1}), vocab).to(logits.dtype());
  return autograd::sum(autograd::log_softmax(logits) * constant(one_hot), {2});
}

Variable softplus(const Variable& x) { return autograd::apply_function(std::make_shared<Softplus>(), {x})[0]; }

Variable ppo_policy_loss(const Variable& logprobs, const Tensor& old_logprobs, const Tensor& advantages,
                         const Tensor& mask, double cliprange) {
  const char* op = "ppo_policy_loss";
  check_same_shape(logprobs.data(), old_logprobs, op, "logprobs", "old_logprobs");
  check_same_shape(logprobs.data(), advantages, op, "logprobs", "advantages");
  check_same_shape(logprobs.data(), mask, op, "logprobs", "mask");
  FATHOM_CHECK(cliprange > 0 && cliprange < 1, op, ": cliprange ", cliprange, " must be in (0, 1) (DeepSpeed-Chat: 0.2)");
  const Variable ratio = autograd::exp((logprobs - constant(old_logprobs)) * constant(mask));
  const Variable minus_advantages = constant(neg(advantages));
  const Variable unclipped = minus_advantages * ratio;
  const Variable clipped = minus_advantages * autograd::clamp(ratio, 1.0 - cliprange, 1.0 + cliprange);
  return masked_mean(autograd::maximum(unclipped, clipped), mask);
}

Variable ppo_value_loss(const Variable& values, const Tensor& old_values, const Tensor& returns, const Tensor& mask,
                        double cliprange_value) {
  const char* op = "ppo_value_loss";
  check_same_shape(values.data(), old_values, op, "values", "old_values");
  check_same_shape(values.data(), returns, op, "values", "returns");
  check_same_shape(values.data(), mask, op, "values", "mask");
  FATHOM_CHECK(cliprange_value > 0, op, ": cliprange_value ", cliprange_value, " must be > 0 (DeepSpeed-Chat: 0.2)");
  // old_values +- c as a clamp of the difference: one op with the clamp's gradient rule.
  const Variable old = constant(old_values);
  const Variable clipped = old + autograd::clamp(values - old, -cliprange_value, cliprange_value);
  const Variable target = constant(returns);
  const Variable unclipped_error = autograd::pow(values - target, 2.0);
  const Variable clipped_error = autograd::pow(clipped - target, 2.0);
  return masked_mean(autograd::maximum(unclipped_error, clipped_error), mask) * 0.5;
}

RewardPairLoss reward_pair_loss(const Variable& chosen_rewards, const Variable& rejected_rewards,
                                const Tensor& chosen_ids, const Tensor& rejected_ids, int64_t pad_id) {
  const char* op = "reward_pair_loss";
  check_same_shape(chosen_rewards.data(), rejected_rewards.data(), op, "chosen_rewards", "rejected_rewards");
  check_same_shape(chosen_rewards.data(), chosen_ids, op, "chosen_rewards", "chosen_ids");
  check_same_shape(chosen_ids, rejected_ids, op, "chosen_ids", "rejected_ids");
  FATHOM_CHECK(chosen_ids.dim() == 2 && chosen_ids.size(0) > 0 && chosen_ids.size(1) > 0, op,
               ": expected (pairs, positions) tensors with at least one pair and one position, got shape ",
               shape_str(chosen_ids.sizes()));
  FATHOM_CHECK(chosen_ids.dtype() == DType::I64 && rejected_ids.dtype() == DType::I64, op,
               ": token ids must be i64, got ", dtype_name(chosen_ids.dtype()), " and ",
               dtype_name(rejected_ids.dtype()));
  const int64_t N = chosen_ids.size(0), T = chosen_ids.size(1);
  const std::vector<int64_t> chosen = chosen_ids.to(kCPU).contiguous().to_vector<int64_t>();
  const std::vector<int64_t> rejected = rejected_ids.to(kCPU).contiguous().to_vector<int64_t>();

  std::vector<float> weights(N * T, 0.0f), chosen_last(N * T, 0.0f), rejected_last(N * T, 0.0f);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t c = first_of(chosen, i, T, pad_id);
    FATHOM_CHECK(c > 0, op, ": chosen sequence ", i, " starts with the pad token ", pad_id,
                 " (sequences are right-padded: prompt and response first)");
    int64_t divergence = T;
    for (int64_t t = 0; t < T && divergence == T; ++t)
      if (chosen[i * T + t] != rejected[i * T + t]) divergence = t;
    int64_t r = c, end = T;
    if (divergence == T) {  // identical sequences: the last position alone
      divergence = T - 1;
    } else {
      r = first_of(rejected, i, T, pad_id);
      FATHOM_CHECK(r > 0, op, ": rejected sequence ", i, " starts with the pad token ", pad_id);
      end = std::max(c, r);
    }
    for (int64_t t = divergence; t < end; ++t) weights[i * T + t] = 1.0f / static_cast<float>(end - divergence);
    chosen_last[i * T + c - 1] = 1.0f;
    rejected_last[i * T + r - 1] = 1.0f;
  }
  const Device device = chosen_rewards.data().device();
  const DType dtype = chosen_rewards.data().dtype();
  auto on_device = [&](const std::vector<float>& v) { return Tensor::from_vector(v, {N, T}).to(dtype).to(device); };
  RewardPairLoss out;
  const Variable per_position = softplus(rejected_rewards - chosen_rewards);  // -log sigmoid(chosen - rejected)
  out.loss = autograd::sum(per_position * constant(on_device(weights))) / static_cast<double>(N);
  out.chosen_scores = fathom::sum(mul(chosen_rewards.data(), on_device(chosen_last)), {1}).to(DType::F32);
  out.rejected_scores = fathom::sum(mul(rejected_rewards.data(), on_device(rejected_last)), {1}).to(DType::F32);
  return out;
}

}  // namespace fathom::nn
