#include "regression_job.h"

#include <cmath>
#include <vector>

#include "autograd/functions.h"
#include "core/generator.h"
#include "nn/linear.h"

namespace fathom::testing {

std::shared_ptr<nn::Sequential> regression_model(uint64_t seed) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(8, 16));
  model->push_back(std::make_shared<nn::Linear>(16, 3));
  Generator gen(seed);
  for (const auto& [name, p] : model->named_parameters()) p.data().copy_(uniform(p.sizes(), gen, -0.3, 0.3));
  return model;
}

autograd::Variable regression_loss(Engine& engine, int64_t step, int rank, double scale) {
  std::vector<float> x(2 * 8), t(2 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * static_cast<float>(i + 7 * step + 31 * rank));
  for (size_t i = 0; i < t.size(); ++i) t[i] = std::cos(0.2f * static_cast<float>(i + 5 * step + 17 * rank));
  const autograd::Variable out = engine(autograd::Variable(Tensor::from_vector(x, {2, 8})));
  const autograd::Variable diff = autograd::sub(out, autograd::Variable(Tensor::from_vector(t, {2, 3})));
  const autograd::Variable loss = autograd::mean(autograd::mul(diff, diff));
  return scale == 1.0 ? loss : autograd::mul(loss, scale);
}

}  // namespace fathom::testing
