#pragma once
// How fathom-chat judges each step on the held-out data, and the summary it keeps of them
// (DIR/summary.json, updated by each step, printed as a table at the end).

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/rlhf/preference_data.h"
#include "models/generation.h"
#include "models/reward_model.h"

namespace fathom::apps {

struct PolicyEvaluation {
  double score = std::nan("");        // the reward model's mean score of the responses
  double sortedness = std::nan("");   // built-in task only: the true metric
  double digits_kept = std::nan("");  // built-in task only
};

// Responses of `actor` to the held-out prompts (sampled as in PPO, from `seed`), scored by
// `reward` (when given) and, on the built-in task, by the rule itself.
PolicyEvaluation evaluate_policy(models::Decoder& actor, models::RewardModel* reward,
                                 const std::vector<PreferencePair>& held_out, const models::SamplingOptions& sampling,
                                 uint64_t seed, bool builtin_task);

// The share of held-out pairs whose chosen response the reward model scores above the rejected.
double reward_accuracy(models::RewardModel& reward, const std::vector<PreferencePair>& held_out, int64_t max_length,
                       int64_t pad);

// Named figures of the steps ("step1.loss", "step3.sortedness", ...), kept in a JSON file.
class ChatSummary {
 public:
  explicit ChatSummary(std::string path);  // reads what earlier runs wrote, if anything
  void set(const std::string& name, double value) { values_[name] = value; }
  double get(const std::string& name) const;  // NaN when absent
  void save() const;
  // The table of what each step achieved.
  std::string table() const;

 private:
  std::string path_;
  std::map<std::string, double> values_;
};

}  // namespace fathom::apps
