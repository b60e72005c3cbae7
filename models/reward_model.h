#pragma once
// DeepSpeed-Chat's reward model (and PPO's critic): a backbone — the decoder of any registered
// architecture (models::ModelSpec) — whose final hidden states go through a scalar value head
// instead of the language-model head, giving one reward per token. The head is a bias-free
// Linear(hidden, 1) named v_head, as there. The backbone's parameters carry its own names
// (model.embed_tokens.weight, model.layers.0...), so a supervised-fine-tuned actor's checkpoint
// loads into it by name (its lm_head aside).
//
// Attention is causal, so the reward at position t depends on tokens 0..t only: a sequence's
// score is its reward at its last real token whatever padding follows (nn/rlhf_loss.h).

#include <memory>

#include "models/decoder.h"
#include "models/model_spec.h"

namespace fathom::models {

class RewardModel : public nn::Module {
 public:
  explicit RewardModel(const ModelSpec& spec, uint64_t seed = kDefaultSeed);
  // idx: (B, T) token ids -> rewards (B, T)
  Variable forward(const Variable& idx) override;
  std::string type_name() const override { return "RewardModel"; }
  const ModelSpec& spec() const { return spec_; }
  // The backbone's parameters from a model of the same spec, by name (the supervised-fine-tuned
  // actor, or Hugging Face weights loaded into one). The value head keeps its own initialisation.
  void load_backbone(const nn::Module& actor);

  std::shared_ptr<Decoder::Body> model;  // the backbone's body
  std::shared_ptr<nn::Linear> v_head;

 private:
  ModelSpec spec_;
  std::shared_ptr<Decoder> backbone_;  // runs the embeddings and the blocks; its LM head is unused
};

}  // namespace fathom::models
