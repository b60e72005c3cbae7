// The C++ snippet of docs/optimizers.md, verbatim (docs_check compares it); "docs:skip" lines are
// the scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>  // docs:skip
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
