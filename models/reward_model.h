#pragma once
// DeepSpeed-Chat's reward model (and PPO's critic): a GPT backbone whose final hidden states go
// through a scalar value head instead of the language-model head, giving one reward per token.
// The head is a bias-free Linear(n_embd, 1) named v_head, as there. The backbone's parameters
// carry GPT's names (transformer.wte.weight, transformer.h.0..., transformer.ln_f...), so a
// supervised-fine-tuned GPT or GPT-2 checkpoint loads into it by name (its lm_head aside).
//
// Attention is causal, so the reward at position t depends on tokens 0..t only: a sequence's
// score is its reward at its last real token whatever padding follows (nn/rlhf_loss.h).

#include <memory>

#include "models/gpt.h"

namespace fathom::models {

class RewardModel : public nn::Module {
 public:
  explicit RewardModel(const GPTConfig& config, uint64_t seed = kDefaultSeed);
  // idx: (B, T) token ids -> rewards (B, T)
  Variable forward(const Variable& idx) override;
  std::string type_name() const override { return "RewardModel"; }
  const GPTConfig& config() const { return backbone_->config(); }
  // The backbone's parameters from a GPT of the same sizes, by name (transformer.*): the
  // supervised-fine-tuned actor, or GPT-2-layout weights loaded into a GPT. The value head keeps
  // its own initialisation.
  void load_backbone(const GPT& gpt);

  std::shared_ptr<GPT::Transformer> transformer;
  std::shared_ptr<nn::Linear> v_head;

 private:
  std::shared_ptr<GPT> backbone_;  // runs the embeddings and the blocks; its LM head is unused
};

}  // namespace fathom::models
