#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "nn/rlhf_loss.h"

using namespace fathom;
using autograd::Variable;

namespace {

Variable leaf(const std::vector<float>& values, const Shape& shape) {
  return Variable(Tensor::from_vector(values, shape), /*requires_grad=*/true);
}
std::vector<double> grad_of(const Variable& v) { return v.grad().to_vector<double>(); }
double softplus_ref(double x) { return std::log1p(std::exp(x)); }
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

TEST_CASE("softplus is stable at both ends and has the sigmoid as its gradient", "[nn][rlhf]") {
  const std::vector<float> xs = {-100.0f, -5.0f, 0.0f, 3.0f, 100.0f};
  const Variable x = leaf(xs, {5});
  const Variable y = nn::softplus(x);
  autograd::sum(y).backward();
  const auto values = y.data().to_vector<double>(), grads = grad_of(x);
  for (size_t i = 0; i < xs.size(); ++i) {
    INFO("x = " << xs[i]);
    CHECK(values[i] == Approx(xs[i] > 50 ? xs[i] : softplus_ref(xs[i])).epsilon(1e-5).margin(1e-30));
    CHECK(grads[i] == Approx(sigmoid_ref(xs[i])).epsilon(1e-5).margin(1e-30));
  }
  CHECK(grads[2] == 0.5);  // where an untrained reward head starts
}

TEST_CASE("reward pair loss and its gradients match a hand-computed case", "[nn][rlhf]") {
  // Pair 0: chosen ends at 4, rejected at 3, they differ from position 2: positions 2 and 3.
  // Pair 1: identical sequences: the last position (4) alone. Pad id 0.
  const Tensor chosen_ids = Tensor::from_vector<int64_t>({5, 6, 7, 8, 0, 3, 4, 0, 0, 0}, {2, 5});
  const Tensor rejected_ids = Tensor::from_vector<int64_t>({5, 6, 9, 0, 0, 3, 4, 0, 0, 0}, {2, 5});
  const Variable chosen = leaf({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.0f, 0.6f, 0.0f, 0.0f, 0.7f}, {2, 5});
  const Variable rejected = leaf({0.1f, 0.2f, -0.1f, 0.9f, 0.0f, 0.0f, 0.1f, 0.0f, 0.0f, 0.2f}, {2, 5});
  const nn::RewardPairLoss out = nn::reward_pair_loss(chosen, rejected, chosen_ids, rejected_ids, 0);
  const double d02 = 0.3 - -0.1, d03 = 0.4 - 0.9, d14 = 0.7 - 0.2;  // chosen - rejected
  const double pair0 = (softplus_ref(-d02) + softplus_ref(-d03)) / 2, pair1 = softplus_ref(-d14);
  CHECK(out.loss.data().item() == Approx((pair0 + pair1) / 2).epsilon(1e-5));
  CHECK(out.chosen_scores.to_vector<float>() == std::vector<float>{0.4f, 0.6f});     // last tokens: 3 and 1
  CHECK(out.rejected_scores.to_vector<float>() == std::vector<float>{-0.1f, 0.1f});  // 2, and 1 (identical)

  out.loss.backward();
  // d/d chosen_t of softplus(rejected_t - chosen_t) * w / pairs = -sigmoid(rejected - chosen) * w / 2.
  std::vector<double> expected_chosen(10, 0.0);
  expected_chosen[2] = -sigmoid_ref(-d02) * 0.5 / 2;
  expected_chosen[3] = -sigmoid_ref(-d03) * 0.5 / 2;
  expected_chosen[9] = -sigmoid_ref(-d14) * 1.0 / 2;
  const auto gc = grad_of(chosen), gr = grad_of(rejected);
  for (int k = 0; k < 10; ++k) {
    INFO("position " << k);
    CHECK(gc[k] == Approx(expected_chosen[k]).margin(1e-7));
    CHECK(gr[k] == Approx(-expected_chosen[k]).margin(1e-7));
  }
}

TEST_CASE("reward pair loss refuses mismatched shapes and sequences that start with padding", "[nn][rlhf]") {
  const Variable r = leaf(std::vector<float>(6, 0.0f), {2, 3});
  const Tensor ids = Tensor::from_vector<int64_t>({1, 2, 0, 1, 3, 0}, {2, 3});
  CHECK_THROWS_WITH(nn::reward_pair_loss(r, leaf(std::vector<float>(4, 0.0f), {2, 2}), ids, ids, 0),
                    Catch::Contains("rejected_rewards has shape [2, 2]"));
  const Tensor padded = Tensor::from_vector<int64_t>({0, 2, 0, 1, 3, 0}, {2, 3});
  CHECK_THROWS_WITH(nn::reward_pair_loss(r, r, padded, ids, 0), Catch::Contains("starts with the pad token"));
}

TEST_CASE("PPO policy loss clips the ratio on the side it guards, with zero gradient there", "[nn][rlhf]") {
  // Ratios around the 1 + 0.2 and 1 - 0.2 boundaries, for positive and negative advantages.
  const std::vector<double> ratios = {1.1, 1.199, 1.201, 1.5, 0.5, 0.799, 0.801, 1.5, 1.0};
  const std::vector<float> advantages = {1, 1, 1, 1, -1, -1, -1, -1, 5};
  const std::vector<float> mask = {1, 1, 1, 1, 1, 1, 1, 1, 0};  // the last one does not count
  std::vector<float> logprobs;
  for (double r : ratios) logprobs.push_back(static_cast<float>(std::log(r)));
  const Variable lp = leaf(logprobs, {1, 9});
  const Tensor old = Tensor::zeros({1, 9}), adv = Tensor::from_vector(advantages, {1, 9});
  const Tensor m = Tensor::from_vector(mask, {1, 9});
  const Variable loss = nn::ppo_policy_loss(lp, old, adv, m, 0.2);
  double expected = 0;
  std::vector<double> expected_grad(9, 0.0);
  for (int t = 0; t < 8; ++t) {
    const double r = std::exp(static_cast<double>(logprobs[t])), a = advantages[t];
    const double unclipped = -a * r, clipped = -a * std::clamp(r, 0.8, 1.2);
    expected += std::max(unclipped, clipped) / 8;
    // The unclipped term decides (gradient -A * ratio) unless the clip is active and larger.
    if (unclipped >= clipped || (r >= 0.8 && r <= 1.2)) expected_grad[t] = -a * r / 8;
  }
  CHECK(loss.data().item() == Approx(expected).epsilon(1e-6));
  loss.backward();
  const auto g = grad_of(lp);
  for (int t = 0; t < 9; ++t) {
    INFO("position " << t << ", ratio " << ratios[t]);
    CHECK(g[t] == Approx(expected_grad[t]).margin(1e-6));
  }
  CHECK(expected_grad[2] == 0.0);  // past 1.2 with A > 0: clipped
  CHECK(expected_grad[5] == 0.0);  // below 0.8 with A < 0: clipped
  CHECK(expected_grad[7] != 0.0);  // past 1.2 with A < 0: the clip does not guard that side
}

TEST_CASE("PPO value loss clips the value's move from the old value", "[nn][rlhf]") {
  const Variable values = leaf({1.0f, 2.0f, 0.0f, 2.0f}, {1, 4});
  const Tensor old = Tensor::from_vector<float>({1.0f, 1.0f, 0.5f, 1.0f}, {1, 4});
  const Tensor returns = Tensor::from_vector<float>({1.5f, 3.0f, -1.0f, 1.5f}, {1, 4});
  const Tensor mask = Tensor::ones({1, 4});
  const Variable loss = nn::ppo_value_loss(values, old, returns, mask, 0.2);
  // Per position max((v - R)^2, (clipped - R)^2): 0.25 (tie), 3.24 (clipped), 1.69 (clipped), 0.25.
  CHECK(loss.data().item() == Approx(0.5 * (0.25 + 3.24 + 1.69 + 0.25) / 4).epsilon(1e-6));
  loss.backward();
  const auto g = grad_of(values);  // (v - R) / 4 where the unclipped error decides, else 0
  CHECK(g[0] == Approx(-0.5 / 4));
  CHECK(g[1] == 0.0);
  CHECK(g[2] == 0.0);
  CHECK(g[3] == Approx(0.5 / 4));
}

TEST_CASE("PPO losses name bad inputs", "[nn][rlhf]") {
  const Variable lp = leaf({0, 0}, {1, 2});
  CHECK_THROWS_WITH(nn::ppo_policy_loss(lp, Tensor::zeros({1, 3}), Tensor::zeros({1, 2}), Tensor::ones({1, 2}), 0.2),
                    Catch::Contains("old_logprobs has shape [1, 3]"));
  CHECK_THROWS_WITH(nn::ppo_policy_loss(lp, Tensor::zeros({1, 2}), Tensor::zeros({1, 2}), Tensor::zeros({1, 2}), 0.2),
                    Catch::Contains("the mask selects no position"));
  CHECK_THROWS_WITH(nn::ppo_policy_loss(lp, Tensor::zeros({1, 2}), Tensor::zeros({1, 2}), Tensor::ones({1, 2}), 1.5),
                    Catch::Contains("cliprange 1.5"));
}

TEST_CASE("token log-probs pick each position's token and send one_hot - softmax back", "[nn][rlhf]") {
  const std::vector<float> values = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f};  // 1 sequence, 2 positions, vocab 3
  const Variable logits = leaf(values, {1, 2, 3});
  const Tensor tokens = Tensor::from_vector<int64_t>({1, 2}, {1, 2});
  const Variable lp = nn::token_logprobs(logits, tokens);
  REQUIRE(lp.sizes() == Shape{1, 2});
  std::vector<double> expected_grad;
  for (int t = 0; t < 2; ++t) {
    double z = 0;
    for (int v = 0; v < 3; ++v) z += std::exp(values[t * 3 + v]);
    const int token = t == 0 ? 1 : 2;
    CHECK(lp.data().to_vector<double>()[t] == Approx(values[t * 3 + token] - std::log(z)).epsilon(1e-6));
    for (int v = 0; v < 3; ++v) expected_grad.push_back((v == token ? 1.0 : 0.0) - std::exp(values[t * 3 + v]) / z);
  }
  autograd::sum(lp).backward();
  const auto g = grad_of(logits);
  for (int k = 0; k < 6; ++k) CHECK(g[k] == Approx(expected_grad[k]).margin(1e-6));
  CHECK_THROWS_WITH(nn::token_logprobs(logits, Tensor::from_vector<int64_t>({1, 2, 0}, {1, 3})),
                    Catch::Contains("tokens must be i64 of shape [1, 2]"));
}
