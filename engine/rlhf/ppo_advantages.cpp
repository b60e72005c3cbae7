#include "engine/rlhf/ppo_advantages.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace fathom {
namespace {

struct Rows {
  int64_t N = 0, L = 0;
};

Rows check_rows(const char* op, const Tensor& reference, std::initializer_list<const Tensor*> others) {
  FATHOM_CHECK(reference.dim() == 2, op, ": expected (sequences, response positions) tensors, got shape ",
               shape_str(reference.sizes()));
  for (const Tensor* t : others)
    FATHOM_CHECK(t->sizes() == reference.sizes(), op, ": shapes differ: ", shape_str(reference.sizes()), " and ",
                 shape_str(t->sizes()), " (every per-token tensor is (sequences, response positions))");
  return {reference.size(0), reference.size(1)};
}

std::vector<double> host(const Tensor& t) { return t.to(kCPU).to(DType::F64).contiguous().to_vector<double>(); }

Tensor device_f32(const std::vector<double>& values, Rows rows, const Tensor& like) {
  std::vector<float> f(values.begin(), values.end());
  return Tensor::from_vector(f, {rows.N, rows.L}).to(like.device());
}

}  // namespace

Tensor ppo_rewards(const Tensor& logprobs, const Tensor& ref_logprobs, const Tensor& scores, const Tensor& mask,
                   const PpoCoefficients& c) {
  const Rows rows = check_rows("ppo_rewards", logprobs, {&ref_logprobs, &mask});
  FATHOM_CHECK(scores.dim() == 1 && scores.size(0) == rows.N, "ppo_rewards: scores must be (", rows.N,
               ",), one per sequence; got shape ", shape_str(scores.sizes()));
  FATHOM_CHECK(c.clip_reward_value > 0, "ppo_rewards: clip_reward_value ", c.clip_reward_value, " must be > 0");
  const std::vector<double> lp = host(logprobs), ref = host(ref_logprobs), m = host(mask), score = host(scores);
  std::vector<double> rewards(lp.size(), 0.0);
  for (int64_t i = 0; i < rows.N; ++i) {
    int64_t last = -1;
    for (int64_t t = 0; t < rows.L; ++t) {
      const int64_t k = i * rows.L + t;
      if (m[k] == 0) continue;
      rewards[k] = -c.kl_ctl * (lp[k] - ref[k]);
      last = t;
    }
    if (last >= 0)
      rewards[i * rows.L + last] += std::clamp(score[i], -c.clip_reward_value, c.clip_reward_value);
  }
  return device_f32(rewards, rows, logprobs);
}

AdvantagesAndReturns ppo_advantages(const Tensor& values, const Tensor& rewards, const Tensor& mask,
                                    const PpoCoefficients& c) {
  const Rows rows = check_rows("ppo_advantages", values, {&rewards, &mask});
  const std::vector<double> v = host(values), r = host(rewards), m = host(mask);
  std::vector<double> advantages(v.size(), 0.0), returns(v.size(), 0.0);
  for (int64_t i = 0; i < rows.N; ++i) {
    double next_value = 0, next_advantage = 0;
    for (int64_t t = rows.L - 1; t >= 0; --t) {
      const int64_t k = i * rows.L + t;
      const double value = m[k] != 0 ? v[k] : 0.0, reward = m[k] != 0 ? r[k] : 0.0;
      const double delta = reward + c.gamma * next_value - value;
      advantages[k] = delta + c.gamma * c.lam * next_advantage;
      returns[k] = advantages[k] + value;
      next_value = value;
      next_advantage = advantages[k];
    }
  }
  return {device_f32(advantages, rows, values), device_f32(returns, rows, values)};
}

Tensor whiten(const Tensor& x, const Tensor& mask) {
  const Rows rows = check_rows("whiten", x, {&mask});
  const std::vector<double> v = host(x), m = host(mask);
  double count = 0, sum = 0;
  for (size_t k = 0; k < v.size(); ++k)
    if (m[k] != 0) count += 1, sum += v[k];
  FATHOM_CHECK(count >= 2, "whiten: needs at least 2 masked positions for a variance, got ", count);
  const double mean = sum / count;
  double squares = 0;
  for (size_t k = 0; k < v.size(); ++k)
    if (m[k] != 0) squares += (v[k] - mean) * (v[k] - mean);
  const double scale = 1.0 / std::sqrt(squares / (count - 1) + 1e-8);
  std::vector<double> out(v.size(), 0.0);
  for (size_t k = 0; k < v.size(); ++k)
    if (m[k] != 0) out[k] = (v[k] - mean) * scale;
  return device_f32(out, rows, x);
}

}  // namespace fathom
