#include "apps/chat/chat_evaluation.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/json.h"
#include "core/json_writer.h"
#include "engine/rlhf/batches.h"
#include "nn/rlhf_loss.h"

namespace fathom::apps {

PolicyEvaluation evaluate_policy(models::Decoder& actor, models::RewardModel* reward,
                                 const std::vector<PreferencePair>& held_out, const models::SamplingOptions& sampling,
                                 uint64_t seed, bool builtin_task) {
  autograd::NoGradGuard no_grad;
  const int64_t max_prompt = actor.config().max_positions - sampling.max_new_tokens;
  double score = 0, sorted = 0, kept = 0;
  int64_t count = 0;
  Generator gen(seed);
  // One batch per prompt length (generation needs equal lengths).
  std::map<size_t, std::vector<PreferencePair>> by_length;
  for (const PreferencePair& p : held_out)
    if (const size_t length = prompt_tokens(p).size(); static_cast<int64_t>(length) <= max_prompt)
      by_length[length].push_back(p);
  for (const auto& [length, pairs] : by_length) {
    const int64_t P = static_cast<int64_t>(length), L = sampling.max_new_tokens;
    const models::Generated out = models::generate(actor, prompt_batch(pairs), sampling, gen);
    if (reward) {
      const std::vector<float> scores = models::last_token_values(
          (*reward)(autograd::Variable(out.sequences)).data(), out, P).to_vector<float>();
      for (float s : scores) score += s;
    }
    const std::vector<int64_t> tokens = out.sequences.to_vector<int64_t>();
    const std::vector<float> mask = out.mask.to_vector<float>();
    for (size_t b = 0; b < pairs.size(); ++b) {
      std::string response;
      for (int64_t t = 0; t < L && mask[b * L + t] != 0; ++t)
        response += static_cast<char>(tokens[b * (P + L) + P + t]);
      if (builtin_task) {
        sorted += sortedness(response);
        kept += keeps_digits(pairs[b].prompt, response) ? 1 : 0;
      }
    }
    count += static_cast<int64_t>(pairs.size());
  }
  FATHOM_CHECK(count > 0, "fathom-chat: no held-out prompt fits the model's ", actor.config().max_positions,
               " positions with ", sampling.max_new_tokens, " new tokens; lower --max-new-tokens");
  PolicyEvaluation e;
  if (reward) e.score = score / count;
  if (builtin_task) e.sortedness = sorted / count, e.digits_kept = kept / count;
  return e;
}

double reward_accuracy(models::RewardModel& reward, const std::vector<PreferencePair>& held_out, int64_t max_length,
                       int64_t pad) {
  autograd::NoGradGuard no_grad;
  constexpr size_t kChunk = 64;
  double right = 0;
  for (size_t start = 0; start < held_out.size(); start += kChunk) {
    const std::vector<PreferencePair> pairs(held_out.begin() + start,
                                            held_out.begin() + std::min(held_out.size(), start + kChunk));
    const RewardBatch batch = reward_batch(pairs, max_length, pad);
    const nn::RewardPairLoss scored = nn::reward_pair_loss(reward(autograd::Variable(batch.chosen)),
                                                           reward(autograd::Variable(batch.rejected)), batch.chosen,
                                                           batch.rejected, pad);
    const auto chosen = scored.chosen_scores.to_vector<float>(), rejected = scored.rejected_scores.to_vector<float>();
    for (size_t i = 0; i < chosen.size(); ++i) right += chosen[i] > rejected[i] ? 1 : 0;
  }
  return right / static_cast<double>(held_out.size());
}

ChatSummary::ChatSummary(std::string path) : path_(std::move(path)) {
  if (!std::filesystem::exists(path_)) return;
  std::ifstream in(path_);
  std::stringstream text;
  text << in.rdbuf();
  const JsonValue json = parse_json(text.str(), path_);
  FATHOM_CHECK(json.is_object(), path_, ": expected a JSON object of numbers (fathom-chat's summary)");
  for (const auto& [name, value] : json.as_object())
    if (value.is_number()) values_[name] = value.as_double();
}

double ChatSummary::get(const std::string& name) const {
  const auto found = values_.find(name);
  return found == values_.end() ? std::nan("") : found->second;
}

void ChatSummary::save() const {
  JsonWriter w;
  w.begin_object();
  for (const auto& [name, value] : values_)
    if (std::isfinite(value)) w.member(name, value);
  w.end_object();
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
  std::ofstream(path_) << w.str() << "\n";
}

std::string ChatSummary::table() const {
  auto figure = [&](const std::string& name, const char* format) {
    const double v = get(name);
    if (!std::isfinite(v)) return std::string("-");
    char out[32];
    std::snprintf(out, sizeof out, format, v);
    return std::string(out);
  };
  std::ostringstream t;
  t << "| step | trained | held-out: sortedness (true metric) | digits kept | reward model's mean score |\n"
    << "|---|---|---|---|---|\n"
    << "| 1 SFT | loss " << figure("step1.loss", "%.3f") << " | " << figure("step1.sortedness", "%.3f") << " | "
    << figure("step1.digits_kept", "%.3f") << " | " << figure("step2.sft_score", "%.3f") << " |\n"
    << "| 2 reward model | loss " << figure("step2.loss", "%.3f") << ", held-out accuracy "
    << figure("step2.accuracy", "%.3f") << " | | | |\n"
    << "| 3 PPO | " << figure("step3.iterations", "%.0f") << " iterations, KL " << figure("step3.kl", "%.3f") << " | "
    << figure("step3.sortedness", "%.3f") << " | " << figure("step3.digits_kept", "%.3f") << " | "
    << figure("step3.score", "%.3f") << " |\n";
  return t.str();
}

}  // namespace fathom::apps
