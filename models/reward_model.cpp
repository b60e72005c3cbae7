#include "models/reward_model.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/init.h"

namespace fathom::models {

RewardModel::RewardModel(const GPTConfig& config, uint64_t seed)
    : backbone_(std::make_shared<GPT>(config, seed)) {
  transformer = register_module("transformer", backbone_->transformer);
  v_head = register_module("v_head", std::make_shared<nn::Linear>(config.n_embd, 1, /*bias=*/false, config.dtype));
  // GPT's initialisation draws stream offsets 0 .. 2 + n_layer * (weights per block); the head
  // takes its own seed's stream, so the backbone is exactly the GPT of this seed.
  Generator gen(seed ^ 0x7265776172640000ull);  // "reward"
  nn::init::normal_(v_head->weight, gen, 0.0, 0.02);
}

Variable RewardModel::forward(const Variable& idx) {
  Variable x = idx;
  for (size_t layer = 0; layer + 1 < backbone_->num_layers(); ++layer) x = backbone_->forward_layer(layer, x);
  const Variable rewards = (*v_head)((*transformer->ln_f)(x));  // (B, T, 1)
  return autograd::reshape(rewards, {idx.size(0), idx.size(1)});
}

void RewardModel::load_backbone(const GPT& gpt) {
  FATHOM_CHECK(gpt.config().n_layer == config().n_layer && gpt.config().n_embd == config().n_embd &&
                   gpt.config().vocab_size == config().vocab_size && gpt.config().block_size == config().block_size,
               "RewardModel.load_backbone: the GPT's sizes (n_layer ", gpt.config().n_layer, ", n_embd ",
               gpt.config().n_embd, ", vocab_size ", gpt.config().vocab_size, ", block_size ", gpt.config().block_size,
               ") differ from the reward model's (", config().n_layer, ", ", config().n_embd, ", ", config().vocab_size,
               ", ", config().block_size, ")");
  autograd::NoGradGuard no_grad;
  const auto source = gpt.transformer->named_parameters();
  const auto target = transformer->named_parameters();
  for (size_t i = 0; i < target.size(); ++i) target[i].second.data().copy_(source.at(i).second.data());
}

}  // namespace fathom::models
