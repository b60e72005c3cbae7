// The engine over its training state: hooks that go with the engine, one engine per model, and
// the micro-step API (backward with given output gradients, train_batch).
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/functions.h"
#include "engine/engine.h"
#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "nn/optimizer_factory.h"
#include "parallel/local_communicator.h"
#include "kernels/elementwise.h"
#include "kernels/reduction.h"
#include "test_util.h"
#include "zero/replicated_state.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::error_of;

namespace {

std::shared_ptr<TokenDataset> tokens() {
  std::vector<uint16_t> ids;
  for (int i = 0; i < 16 * 32 + 1; ++i) ids.push_back(static_cast<uint16_t>((i * 31 + i / 5) % 251));
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(ids, 32, 256));
}

Config config_with(const std::string& extra) {
  return Config::from_string(R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}})" +
                             extra + "}");
}

size_t hooks_on(nn::Module& model) {
  size_t count = 0;
  for (const auto& [name, param] : model.named_parameters()) count += param.grad_ready_hook_count();
  for (const auto& [name, module] : model.named_modules()) count += module->forward_hook_count();
  return count;
}

void train_one_step(const Initialized& init) {
  for (const Batch& batch : *init.loader) {
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs), batch.sample_index),
                                            batch.targets, batch.loss_normaliser));
    init.engine->step();
    if (init.engine->global_steps() == 1) return;
  }
}

}  // namespace

TEST_CASE("destroying an engine removes every hook it installed on the model", "[engine]") {
  for (const std::string extra :
       {R"(, "bf16": {"enabled": true})", R"(, "zero_optimization": {"stage": 1}, "bf16": {"enabled": true})",
        R"(, "zero_optimization": {"stage": 2}, "bf16": {"enabled": true})",
        R"(, "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0})"}) {
    INFO(extra);
    auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 7);
    REQUIRE(hooks_on(*model) == 0);
    {
      const Initialized init = initialize(config_with(extra), model, nullptr, tokens());
      CHECK(hooks_on(*model) > 0);
      train_one_step(init);
      if (extra.find("stage\": 3") != std::string::npos) {
        fathom::testing::require_stage3_partitioned(*init.engine);
        zero::ParameterResidency* residency = init.engine->training_state().residency();
        REQUIRE(residency != nullptr);
        residency->gather_full_parameters();
      }
    }
    CHECK(hooks_on(*model) == 0);
    // The model is free again: a new engine over it trains (its hooks, once each).
    const Initialized again = initialize(config_with(""), model, nullptr, tokens());
    train_one_step(again);
    CHECK(again.engine->global_steps() == 1);
  }
}

TEST_CASE("a second engine on a model that already has one is refused by name", "[engine]") {
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 7);
  const Initialized first = initialize(config_with(""), model, nullptr, tokens());
  CHECK(error_of([&] { initialize(config_with(""), model, nullptr, tokens()); }) ==
        "Decoder: this model is already trained by an engine; one engine per model: destroy the first engine before "
        "initializing another on the same model (for several models side by side, e.g. actor and critic, give each "
        "engine its own model)");
  // Several engines over several models in one process are fine (RLHF's actor and critic).
  auto other = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 8);
  const Initialized second =
      initialize(config_with(R"(, "zero_optimization": {"stage": 2})"), other, nullptr, tokens());
  train_one_step(first);
  train_one_step(second);
  CHECK(first.engine->global_steps() == 1);
  CHECK(second.engine->global_steps() == 1);
}

TEST_CASE("backward(outputs, grad_outputs) equals backward(loss) for the same gradient", "[engine]") {
  // loss = sum(out * c): its gradient with respect to out is c.
  const auto run = [](bool with_gradients) {
    auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 3);
    EngineOptions options;
    options.micro_batch_size = 2;
    options.gradient_accumulation_steps = 2;
    Engine engine(model, nn::make_optimizer("SGD", {{"lr", 0.1}}, model->named_parameters()), nullptr, options);
    const autograd::Variable idx(Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
    for (int micro = 0; micro < 4; ++micro) {
      const autograd::Variable out = engine(idx);
      Tensor c = Tensor::arange(out.numel()).to(DType::F32).reshape(out.sizes());
      c = mul(c, 1e-3 * (micro + 1));
      if (with_gradients)
        engine.backward({out}, {c});
      else
        engine.backward(autograd::sum(autograd::mul(out, autograd::Variable(c))));
      engine.step();
    }
    CHECK(engine.global_steps() == 2);
    return model->state_dict();
  };
  const nn::NamedTensors by_loss = run(false), by_gradients = run(true);
  for (size_t i = 0; i < by_loss.size(); ++i) {
    INFO(by_loss[i].first);
    CHECK(by_loss[i].second.to_vector<float>() == by_gradients[i].second.to_vector<float>());
  }
}

TEST_CASE("backward with given gradients checks that they pair with the outputs", "[engine]") {
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 3);
  Engine engine(model, nn::make_optimizer("SGD", {{"lr", 0.1}}, model->named_parameters()), nullptr, EngineOptions{});
  const autograd::Variable out = engine(autograd::Variable(Tensor::from_vector<int64_t>({1, 2}, {1, 2})));
  CHECK(error_of([&] { engine.backward({out}, {}); }) ==
        "engine.backward: 1 outputs but 0 gradients; pass one gradient per output");
  CHECK(error_of([&] { engine.backward(out); }) ==
        "engine.backward: the loss must be a scalar, got shape [1, 2, 256]; for other outputs pass their gradients: "
        "backward(outputs, grad_outputs)");
}

TEST_CASE("train_batch runs one optimizer step exactly as the micro-batch loop does", "[engine]") {
  const auto run = [](bool with_train_batch) {
    auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 5);
    const Initialized init =
        initialize(Config::from_string(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
                                "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})"),
                   model, nullptr, tokens());
    std::vector<double> losses;
    auto it = init.loader->begin();
    for (int step = 0; step < 2; ++step) {
      if (with_train_batch) {
        losses.push_back(init.engine
                             ->train_batch([&] {
                               Batch batch = *it;
                               ++it;
                               return batch;
                             })
                             .loss);
        continue;
      }
      for (int micro = 0; micro < 4; ++micro, ++it) {
        init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable((*it).inputs), (*it).sample_index),
                                                (*it).targets, (*it).loss_normaliser));
        init.engine->step();
      }
      losses.push_back(init.engine->last_report().loss);
    }
    CHECK(init.engine->global_steps() == 2);
    CHECK(init.engine->micro_steps() == 8);
    return std::make_pair(losses, model->state_dict());
  };
  const auto [loop_losses, loop_weights] = run(false);
  const auto [batch_losses, batch_weights] = run(true);
  CHECK(loop_losses == batch_losses);
  for (size_t i = 0; i < loop_weights.size(); ++i) {
    INFO(loop_weights[i].first);
    CHECK(loop_weights[i].second.to_vector<float>() == batch_weights[i].second.to_vector<float>());
  }
}

TEST_CASE("an explicit accumulation boundary overrides the micro-step count", "[engine]") {
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 3);
  EngineOptions options;
  options.gradient_accumulation_steps = 4;
  Engine engine(model, nn::make_optimizer("SGD", {{"lr", 0.1}}, model->named_parameters()), nullptr, options);
  const autograd::Variable idx(Tensor::from_vector<int64_t>({1, 2, 3}, {1, 3}));
  const Tensor targets = Tensor::from_vector<int64_t>({2, 3, 4}, {1, 3});
  CHECK_FALSE(engine.is_gradient_accumulation_boundary());
  engine.set_gradient_accumulation_boundary(true);  // a schedule that counts micro-batches itself
  engine.backward(nn::cross_entropy(engine(idx), targets));
  engine.step();
  CHECK(engine.global_steps() == 1);
  engine.set_gradient_accumulation_boundary(std::nullopt);
  CHECK_FALSE(engine.is_gradient_accumulation_boundary());
}

TEST_CASE("an evaluation engine has no optimizer, shards at ZeRO-3 and refuses to step", "[engine]") {
  const autograd::Variable idx(Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
  auto reference = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 11);
  reference->eval();
  const std::vector<float> expected = (*reference)(idx).data().to_vector<float>();
  const auto groups = parallel::ProcessGroups::data_parallel(std::make_shared<parallel::LocalCommunicator>());

  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 11);
  model->eval();
  const auto engine =
      initialize_for_evaluation(Config::from_string(R"({"train_batch_size": 2, "zero_optimization": {"stage": 3,
                              "stage3_param_persistence_threshold": 0}})"),
                                model, groups);
  CHECK(engine->optimizer() == nullptr);
  CHECK((*engine)(idx).data().to_vector<float>() == expected);
  CHECK(model->named_parameters()[0].second.numel() == 0);  // released again after the forward
  fathom::testing::require_stage3_partitioned(*engine);
  CHECK(error_of([&] { engine->optimizer_step(); }) ==
        "engine: an optimizer step on an engine without an optimizer (it was initialized for evaluation); give the "
        "config an \"optimizer\" section to train");
  CHECK(error_of([&] { engine->save_checkpoint("/tmp/unused"); }).find("has no optimizer") != std::string::npos);

  // A 16-bit evaluation engine keeps no fp32 master weights.
  auto half = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 11);
  const auto bf16 = initialize_for_evaluation(
      Config::from_string(R"({"train_batch_size": 2, "bf16": {"enabled": true}})"), half, groups);
  CHECK_FALSE(bf16->training_state().keeps_masters());
  CHECK(half->named_parameters()[0].second.dtype() == DType::BF16);
}

TEST_CASE("dataloader_drop_last: the epoch's short last global batch is skipped, or kept as one more step", "[engine]") {
  const auto steps_per_epoch = [](const std::string& extra) {
    std::vector<uint16_t> ids(10 * 8 + 1, 3);  // 10 samples of 8 tokens
    auto data = std::make_shared<TokenDataset>(TokenDataset::from_tokens(ids, 8, 256));
    auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 1);
    const Initialized init = initialize(
        Config::from_string(R"({"train_batch_size": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.1}})" + extra +
                            "}"),
        model, nullptr, data);
    int64_t steps = 0;
    for (const Batch& batch : *init.loader)
      if (batch.epoch == 0) ++steps;
      else break;
    return steps;
  };
  CHECK(steps_per_epoch("") == 2);  // Fathom's default: full global batches only
  CHECK(steps_per_epoch(R"(, "dataloader_drop_last": true)") == 2);
  CHECK(steps_per_epoch(R"(, "dataloader_drop_last": false)") == 3);  // DeepSpeed's default: the tail of 2 is kept
}

TEST_CASE("data_types.grad_accum_dtype: gradients accumulate in the model's 16 bits or in fp32", "[engine]") {
  const auto run = [](const std::string& extra, bool inspect) {
    // No q/k/v biases: the key bias's true gradient is 0, so it holds only rounding noise, which
    // neither SGD nor the bounds below can compare.
    models::DecoderConfig config = models::DecoderConfig::preset("gpt2-tiny");
    config.qkv_bias = false;
    auto model = std::make_shared<models::Decoder>(config, 9);
    const Initialized init = initialize(
        // SGD: Adam would move a parameter of ~0 true gradient by lr on rounding noise alone.
        Config::from_string(R"({"train_batch_size": 4, "gradient_accumulation_steps": 2, "bf16": {"enabled": true},
            "optimizer": {"type": "SGD", "params": {"lr": 0.5, "momentum": 0.9}})" + extra + "}"),
        model, nullptr, tokens());
    int micro = 0;
    for (const Batch& batch : *init.loader) {
      init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs), batch.sample_index),
                                              batch.targets, batch.loss_normaliser));
      if (inspect && micro == 0) {
        // After the first of two micro-batches the gradient is still the model's bf16 one.
        const auto* state = dynamic_cast<const zero::ReplicatedState*>(&init.engine->training_state());
        REQUIRE(state != nullptr);
        CHECK(model->named_parameters()[0].second.grad().dtype() == DType::BF16);
        CHECK_FALSE(state->updated()[0].second.grad().defined());
      }
      init.engine->step();
      if (++micro == 8) break;
    }
    return model->state_dict();
  };
  const auto in_fp32 = run("", false);
  const auto in_bf16 = run(R"(, "data_types": {"grad_accum_dtype": "bf16"})", true);
  const auto zero_bf16 = run(R"(, "data_types": {"grad_accum_dtype": "bf16"}, "zero_optimization": {"stage": 2})", false);
  for (size_t i = 0; i < in_fp32.size(); ++i) {
    INFO(in_fp32[i].first);
    const Tensor a = in_fp32[i].second.to(DType::F64), b = in_bf16[i].second.to(DType::F64);
    const Tensor c = zero_bf16[i].second.to(DType::F64);
    const double norm = std::sqrt(sum(mul(a, a)).item()) + 1e-12;
    CHECK(std::sqrt(sum(mul(sub(a, b), sub(a, b))).item()) / norm < 1e-2);
    CHECK(std::sqrt(sum(mul(sub(a, c), sub(a, c))).item()) / norm < 1e-2);
  }
  CHECK(error_of([] {
          Config::from_string(R"({"train_batch_size": 4, "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp16"}})");
        }) == "config error at data_types.grad_accum_dtype: \"fp16\" with a model trained in bf16; gradients accumulate "
              "in fp32 or in the model's own dtype (\"bf16\")");
}
