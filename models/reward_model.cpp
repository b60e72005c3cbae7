#include "models/reward_model.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/init.h"

namespace fathom::models {

RewardModel::RewardModel(const ModelSpec& spec, uint64_t seed)
    : spec_(spec), backbone_(std::static_pointer_cast<Decoder>(spec.build(seed))) {
  model = register_module("model", backbone_->model);
  const DType dtype = spec.decoder.dtype;
  v_head = register_module("v_head", std::make_shared<nn::Linear>(spec.hidden_size(), 1, /*bias=*/false, dtype));
  // The backbone's initialisation draws its own stream offsets; the head takes its own seed's
  // stream, so the backbone is exactly the model of this seed.
  Generator gen(seed ^ 0x7265776172640000ull);  // "reward"
  nn::init::normal_(v_head->weight, gen, 0.0, 0.02);
}

Variable RewardModel::forward(const Variable& idx) {
  Variable x = idx;
  for (size_t layer = 0; layer + 1 < backbone_->num_layers(); ++layer) x = backbone_->forward_layer(layer, x);
  const Variable rewards = (*v_head)((*model->norm)(x));  // (B, T, 1)
  return autograd::reshape(rewards, {idx.size(0), idx.size(1)});
}

void RewardModel::load_backbone(const nn::Module& actor) {
  autograd::NoGradGuard no_grad;
  for (const auto& [name, parameter] : named_parameters()) {
    if (name.rfind("v_head.", 0) == 0) continue;
    const Variable source = actor.parameter(name);  // throws naming the parameter a different model lacks
    FATHOM_CHECK(source.sizes() == parameter.sizes(), "RewardModel.load_backbone: \"", name, "\" is ",
                 shape_str(source.sizes()), " in the actor but ", shape_str(parameter.sizes()),
                 " in the reward model; give it the actor's sizes (", spec_.describe(), ")");
    parameter.data().copy_(source.data());
  }
}

}  // namespace fathom::models
