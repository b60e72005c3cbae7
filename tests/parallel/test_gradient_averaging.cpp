// DeepSpeed's gradient averaging knobs at 2 and 4 ranks: prescale_gradients and
// gradient_predivide_factor compute the same function as plain averaging (f32, within 1e-6),
// and with 16-bit communication prescaling keeps a sum that would overflow finite.
#include <catch2/catch.hpp>

#include "autograd/functions.h"
#include "engine/initialize.h"
#include "gpt_training.h"
#include "mpi_test_util.h"
#include "nn/module.h"

using namespace fathom;
using fathom::testing::require_equivalent;
using fathom::testing::runtime;
using fathom::testing::train_tiny_gpt;

namespace {
constexpr int kSteps = 6;

std::string config_text(int stage, const std::string& extra) {
  return detail::concat(R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 5e-4}},
      "gradient_clipping": 1.0, "seed": 7, "zero_optimization": {"stage": )", stage, "}", extra, "}");
}
}  // namespace

TEST_CASE("prescaling and predivision compute plain averaging's function (f32, stages 0-2)", "[parallel]") {
  const auto& world = runtime().world_ptr();
  if (world->size() == 1) return;
  for (int stage : {0, 1, 2}) {
    const testing::TrainingRun plain = train_tiny_gpt(config_text(stage, ""), world, kSteps);
    for (const std::string extra : {std::string(R"(, "prescale_gradients": true)"),
                                    std::string(R"(, "gradient_predivide_factor": 2.0)"),
                                    std::string(R"(, "prescale_gradients": true, "communication_data_type": "fp32")")}) {
      INFO("stage " << stage << extra);
      require_equivalent(plain, train_tiny_gpt(config_text(stage, extra), world, kSteps), 1e-6);
    }
  }
}

namespace {
struct Weight : nn::Module {
  autograd::Variable w;
  Weight() { w = register_parameter("w", Tensor::from_vector<float>({1, 2, 3, 4})); }
};

// One step in which every rank's scaled fp16 gradient is 40000 (loss scale 1024 times
// 39.0625): their sum overflows fp16 at any world size, the prescaled sum (1/N each) does not.
struct Outcome {
  bool skipped = false;
  std::vector<float> weights;
};
Outcome step_with(const std::string& extra) {
  auto model = std::make_shared<Weight>();
  const Initialized init = initialize(
      Config::from_string(detail::concat(R"({"train_batch_size": )", runtime().size(),
                                         R"(, "optimizer": {"type": "SGD", "params": {"lr": 0.01}},
          "fp16": {"enabled": true, "loss_scale": 1024}, "communication_data_type": "fp16")", extra, "}")),
      model, nullptr, nullptr, runtime().world_ptr());
  const autograd::Variable c(Tensor::full({4}, 39.0625, DType::F16));
  init.engine->backward(autograd::sum(autograd::mul(model->w, c)));
  init.engine->step();
  return {init.engine->last_report().skipped, model->w.data().to(DType::F32).to_vector<float>()};
}
}  // namespace

TEST_CASE("with fp16 communication, prescaling keeps a sum that overflows without it finite", "[parallel]") {
  if (runtime().size() == 1) return;
  for (const std::string zero : {std::string(""), std::string(R"(, "zero_optimization": {"stage": 2})")}) {
    INFO("config" << zero);
    CHECK(step_with(zero).skipped);  // N x 40000 is Inf in fp16: the step is skipped
    const Outcome prescaled = step_with(zero + R"(, "prescale_gradients": true)");
    CHECK_FALSE(prescaled.skipped);
    for (size_t i = 0; i < 4; ++i) CHECK(prescaled.weights[i] == Approx(static_cast<float>(i + 1) - 0.01 * 39.0625).epsilon(2e-3));
  }
}
