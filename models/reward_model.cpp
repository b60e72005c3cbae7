#include "models/reward_model.h"

#include "autograd/functions.h"
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

}  // namespace fathom::models
