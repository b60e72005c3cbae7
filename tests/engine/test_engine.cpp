#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/functions.h"
#include "engine/data/loader.h"
#include "engine/engine.h"
#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "nn/optimizer_factory.h"
#include "test_util.h"
#include "zero/sharded_state.h"

using namespace fathom;
using fathom::testing::error_of;

namespace {

std::shared_ptr<TokenDataset> token_data() {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 24 * 32 + 1; ++i) tokens.push_back(static_cast<uint16_t>((i * 37 + i / 7) % 251));
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, 32, 256));
}

struct Trajectory {
  std::vector<double> losses;
  nn::NamedTensors weights;
};

// Three optimizer steps of a tiny GPT-2 with global batch 8 = micro * gas. SGD, because Adam
// normalises each gradient element: parameters whose true gradient is ~0 (the key bias) would
// move by ±lr on f32 rounding noise and hide what this test compares.
Trajectory train(int64_t micro, int64_t gas) {
  models::DecoderConfig config = models::DecoderConfig::preset("gpt2-tiny");
  config.dropout = 0.1;  // dropout masks follow global sample indices, so they match too
  // No q/k/v biases: the key bias's true gradient is 0 (a constant shift of each query's
  // scores), so it holds only f32 rounding noise, whose relative difference says nothing.
  config.qkv_bias = false;
  auto model = std::make_shared<models::Decoder>(config, 3);
  auto optimizer = nn::make_optimizer("SGD", {{"lr", 0.5}, {"momentum", 0.9}}, model->named_parameters());
  EngineOptions options;
  options.micro_batch_size = micro;
  options.gradient_accumulation_steps = gas;
  Engine engine(model, std::move(optimizer), nullptr, options);
  DataLoader loader(token_data(), micro, gas, 0, 1, /*shuffle=*/true, /*seed=*/5);
  Trajectory t;
  for (const Batch& batch : loader) {
    const autograd::Variable logits = engine(autograd::Variable(batch.inputs), batch.sample_index);
    engine.backward(nn::cross_entropy(logits, batch.targets, batch.loss_normaliser));
    const bool boundary = engine.is_gradient_accumulation_boundary();
    engine.step();
    if (boundary) t.losses.push_back(engine.last_report().loss);
    if (engine.global_steps() == 3) break;
  }
  t.weights = model->state_dict();
  return t;
}

double relative_difference(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff += (x[i] - y[i]) * (x[i] - y[i]);
    norm += y[i] * y[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

}  // namespace

TEST_CASE("gradient accumulation: micro-batch 2 x 4 equals batch 8 x 1", "[engine]") {
  const Trajectory whole = train(8, 1);
  const Trajectory accumulated = train(2, 4);
  REQUIRE(whole.losses.size() == 3);
  REQUIRE(accumulated.losses.size() == 3);
  for (size_t s = 0; s < 3; ++s) {
    INFO("step " << s << ": " << whole.losses[s] << " vs " << accumulated.losses[s]);
    CHECK(std::fabs(whole.losses[s] - accumulated.losses[s]) / whole.losses[s] < 1e-6);
  }
  for (size_t i = 0; i < whole.weights.size(); ++i) {
    INFO(whole.weights[i].first);
    CHECK(relative_difference(accumulated.weights[i].second, whole.weights[i].second) < 1e-6);
  }
}

TEST_CASE("the engine steps only at accumulation boundaries and counts like DeepSpeed", "[engine]") {
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"));
  EngineOptions options;
  options.micro_batch_size = 2;
  options.gradient_accumulation_steps = 3;
  Engine engine(model, nn::make_optimizer("SGD", {{"lr", 0.1}}, model->named_parameters()), nullptr, options);
  const autograd::Variable idx(Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2}));
  std::vector<bool> boundaries;
  for (int micro = 0; micro < 6; ++micro) {
    boundaries.push_back(engine.is_gradient_accumulation_boundary());
    engine.backward(nn::cross_entropy(engine(idx), Tensor::from_vector<int64_t>({2, 3, 4, 5}, {2, 2})));
    engine.step();
  }
  CHECK(boundaries == std::vector<bool>{false, false, true, false, false, true});
  CHECK(engine.global_steps() == 2);
  CHECK(engine.global_samples() == 12);
  CHECK(engine.micro_steps() == 6);
  CHECK(engine.last_report().tokens_per_second > 0);
  CHECK_FALSE(model->parameters()[0].grad().defined());  // zeroed after the step
}

TEST_CASE("initialize builds the optimizer, schedule and loader from the config", "[engine]") {
  Config config = Config::from_string(R"({
    "train_batch_size": 8, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3, "warmup_num_steps": 10}},
    "gradient_clipping": 1.0
  })");
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"));
  const Initialized init = initialize(config, model, nullptr, token_data());
  REQUIRE(init.loader);
  REQUIRE(init.scheduler);
  CHECK(init.engine->options().micro_batch_size == 4);
  CHECK(init.optimizer->type() == "AdamW");
  CHECK(init.optimizer->lr() == init.scheduler->get_lr());  // the lr in force before the first step

  Config bare = Config::from_string(R"({"train_batch_size": 8})");
  CHECK_THROWS_WITH(initialize(bare, model), Catch::Contains("initialize: no optimizer; add an \"optimizer\" section"));
  CHECK_THROWS_WITH(initialize(config, model, nn::make_optimizer("SGD", {{"lr", 0.1}}, model->parameters())),
                    Catch::Contains("an optimizer was passed and the config has an \"optimizer\" section too"));
}

TEST_CASE("ZeRO on one process: the engine owns the sharded optimizer; Lamb and passed optimizers are refused",
          "[engine]") {
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"));
  const std::string zero1 = R"({"train_batch_size": 8, "zero_optimization": {"stage": 1},
                                "optimizer": {"type": "Lamb", "params": {"lr": 1e-3}}})";
  CHECK(error_of([&] { initialize(Config::from_string(zero1), model); }) ==
        "config error at optimizer.type: Lamb computes a trust ratio per parameter, which a ZeRO shard (a slice of "
        "the flattened parameters) does not have; use Adam, AdamW, SGD or Lion with zero_optimization.stage 1, or "
        "stage 0");
  const Config zero2 = Config::from_string(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2}})");
  CHECK(error_of([&] { initialize(zero2, model, nn::make_optimizer("SGD", {{"lr", 0.1}}, model->parameters())); }) ==
        "initialize: with ZeRO the engine builds the optimizer over this rank's shard; describe it in the config's "
        "\"optimizer\" section instead of passing one");
  const Initialized init = initialize(
      Config::from_string(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2},
                              "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}})"),
      model, nullptr, token_data());
  const zero::ShardedState* zero = zero::as_sharded(init.engine->training_state());
  REQUIRE(zero != nullptr);
  CHECK(zero->stage() == 2);
  CHECK(zero->group().backend() == std::string("local"));
}

TEST_CASE("a non-finite loss or gradient norm stops the step before the weights change, naming why", "[engine]") {
  const auto engine_on = [](const std::shared_ptr<nn::Module>& model) {
    return std::make_unique<Engine>(model, nn::make_optimizer("AdamW", {{"lr", 1e-2}}, model->named_parameters()),
                                    nullptr, EngineOptions{});
  };
  const auto step = [](Engine& engine, const Tensor& input) {
    engine.backward(autograd::sum(engine(autograd::Variable(input))));
    engine.step();
  };
  SECTION("a NaN weight is named") {
    auto model = std::make_shared<nn::Linear>(3, 2);
    model->named_parameters()[1].second.data().fill_(std::nan(""));  // the bias
    auto engine = engine_on(model);
    const std::string message = error_of([&] { step(*engine, Tensor::ones({4, 3})); });
    INFO(message);
    CHECK(message.rfind("step 1: the loss is nan and the gradient norm ", 0) == 0);
    CHECK(message.find("; parameter bias already holds NaN/Inf") != std::string::npos);
    CHECK(engine->global_steps() == 0);
    CHECK(std::isfinite(model->named_parameters()[0].second.data().to_vector<float>()[0]));  // the weight: untouched
  }
  SECTION("finite weights and an overflowing input: the gradients are blamed, the weights keep their values") {
    auto model = std::make_shared<nn::Linear>(3, 2);
    const std::vector<float> before = model->named_parameters()[0].second.data().to_vector<float>();
    auto engine = engine_on(model);
    const std::string message = error_of([&] { step(*engine, Tensor::full({4, 3}, INFINITY)); });
    CHECK(message.find("every weight is finite, so this step's loss or gradients overflowed") != std::string::npos);
    CHECK(model->named_parameters()[0].second.data().to_vector<float>() == before);
  }
  SECTION("with the check off the step runs") {
    auto model = std::make_shared<nn::Linear>(3, 2);
    auto engine = engine_on(model);
    engine->set_stop_on_non_finite(false);
    step(*engine, Tensor::full({4, 3}, INFINITY));
    CHECK(engine->global_steps() == 1);
    CHECK(std::isnan(engine->last_report().loss));
  }
}
