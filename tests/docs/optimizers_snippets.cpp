// The C++ snippet of docs/optimizers.md, verbatim (docs_check compares it); "docs:skip" lines are
// the scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>  // docs:skip
#include "parallel/compressed_optimizer.h"  // docs:skip
#include "nn/optimizer_factory.h"

TEST_CASE("optimizers.md: an optimizer from its config section") {  // docs:skip
  using namespace fathom;  // docs:skip
  nn::Linear model(3, 2);  // docs:skip
  const Tensor before = model.named_parameters().front().second.data().clone();  // docs:skip
  autograd::Variable loss = autograd::sum(model(autograd::Variable(Tensor::ones({4, 3}))));  // docs:skip
// {"optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "weight_decay": 0.1}}}
auto optimizer = fathom::nn::make_optimizer(
    "AdamW", {{"lr", 3e-4}, {"betas", {0.9, 0.95}}, {"weight_decay", 0.1}}, model.named_parameters());
loss.backward();
fathom::nn::clip_grad_norm(model.parameters(), 1.0);  // "gradient_clipping": 1.0
optimizer->step();
optimizer->zero_grad();
  CHECK(before.to_vector<float>() != model.named_parameters().front().second.data().to_vector<float>());  // docs:skip
}  // docs:skip

TEST_CASE("optimizers.md: an exp_avg_mask for the compressed optimizers") {  // docs:skip
  using namespace fathom;  // docs:skip
  auto config = Config::from_string(R"({"train_batch_size": 1, "optimizer": {"type": "OneBitAdam"}})");  // docs:skip
  auto gpt = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 1);  // docs:skip
  auto engine = initialize(config, gpt).engine;  // docs:skip
  const autograd::Variable wpe = gpt->model->embed_positions->weight;  // docs:skip
  Tensor mask = Tensor::ones({wpe.sizes()[0], 1});  // positions past 8 are never trained  // docs:skip
  mask.narrow(0, 8, wpe.sizes()[0] - 8).fill_(0.0);  // docs:skip
auto& compressed = dynamic_cast<fathom::parallel::CompressedOptimizer&>(*engine->optimizer());
compressed.set_exp_avg_mask(wpe, mask);  // f32, broadcastable to the parameter: 1 keep, 0 hold at zero
  CHECK_THROWS(compressed.set_exp_avg_mask(wpe, Tensor::ones({3})));  // docs:skip
}  // docs:skip
