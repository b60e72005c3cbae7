#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "engine/rlhf/ppo_advantages.h"

using namespace fathom;

TEST_CASE("PPO rewards: the KL penalty per token and the clipped score at the last generated token", "[rlhf]") {
  const Tensor lp = Tensor::from_vector<float>({-1.0f, -2.0f, -0.5f, -1.0f, -3.0f, -1.0f}, {2, 3});
  const Tensor ref = Tensor::from_vector<float>({-1.5f, -1.0f, -0.5f, -2.0f, -1.0f, -1.0f}, {2, 3});
  const Tensor mask = Tensor::from_vector<float>({1, 1, 1, 1, 1, 0}, {2, 3});  // row 1 ended after 2 tokens
  const Tensor scores = Tensor::from_vector<float>({7.0f, -9.0f});
  const auto r = ppo_rewards(lp, ref, scores, mask, PpoCoefficients{}).to_vector<float>();
  CHECK(r[0] == Approx(-0.1 * 0.5));
  CHECK(r[1] == Approx(-0.1 * -1.0));
  CHECK(r[2] == Approx(0.0 + 5.0));         // score 7 clipped to 5
  CHECK(r[3] == Approx(-0.1 * 1.0));
  CHECK(r[4] == Approx(-0.1 * -2.0 - 5.0));  // score -9 clipped to -5, at the last generated token
  CHECK(r[5] == 0.0f);                       // padding
  CHECK_THROWS_WITH(ppo_rewards(lp, ref, Tensor::zeros({3}), mask, PpoCoefficients{}),
                    Catch::Contains("scores must be (2,)"));
}

TEST_CASE("GAE matches the direct sum of discounted TD errors", "[rlhf]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const int64_t N = 3, L = 7;
  const std::vector<int64_t> lengths = {7, 4, 1};
  std::vector<float> values(N * L), rewards(N * L), mask(N * L, 0.0f);
  for (auto& v : values) v = normal(rng);
  for (auto& r : rewards) r = normal(rng);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t t = 0; t < lengths[i]; ++t) mask[i * L + t] = 1;
  PpoCoefficients c;
  c.gamma = 0.9;
  c.lam = 0.8;
  const auto out = ppo_advantages(Tensor::from_vector(values, {N, L}), Tensor::from_vector(rewards, {N, L}),
                                  Tensor::from_vector(mask, {N, L}), c);
  const auto advantages = out.advantages.to_vector<float>(), returns = out.returns.to_vector<float>();
  for (int64_t i = 0; i < N; ++i)
    for (int64_t t = 0; t < L; ++t) {
      // A_t = sum_l (gamma lam)^l delta_{t+l}, with V and r zero past the row's end.
      auto V = [&](int64_t s) { return s < lengths[i] ? static_cast<double>(values[i * L + s]) : 0.0; };
      auto R = [&](int64_t s) { return s < lengths[i] ? static_cast<double>(rewards[i * L + s]) : 0.0; };
      double expected = 0;
      for (int64_t s = t; s < L; ++s)
        expected += std::pow(c.gamma * c.lam, static_cast<double>(s - t)) * (R(s) + c.gamma * V(s + 1) - V(s));
      INFO("row " << i << " position " << t);
      CHECK(advantages[i * L + t] == Approx(expected).margin(1e-5));
      CHECK(returns[i * L + t] == Approx(expected + V(t)).margin(1e-5));
      if (t >= lengths[i]) CHECK(advantages[i * L + t] == 0.0f);
    }
}

TEST_CASE("whitening gives mean 0 and variance 1 over the masked positions", "[rlhf]") {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 100, 4, 5, 6, -100}, {2, 4});
  const Tensor mask = Tensor::from_vector<float>({1, 1, 1, 0, 1, 1, 1, 0}, {2, 4});
  const auto w = whiten(x, mask).to_vector<float>();
  double mean = 0, var = 0;
  for (int k : {0, 1, 2, 4, 5, 6}) mean += w[k] / 6;
  for (int k : {0, 1, 2, 4, 5, 6}) var += (w[k] - mean) * (w[k] - mean) / 5;
  CHECK(mean == Approx(0.0).margin(1e-6));
  CHECK(var == Approx(1.0).epsilon(1e-5));
  CHECK(w[3] == 0.0f);
  CHECK(w[7] == 0.0f);
  CHECK(w[0] == Approx((1 - 3.5) / std::sqrt(3.5)).epsilon(1e-5));  // variance of 1..6 is 3.5
  CHECK_THROWS_WITH(whiten(x, Tensor::zeros({2, 4})), Catch::Contains("at least 2 masked positions"));
}
