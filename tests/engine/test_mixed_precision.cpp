#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "autograd/functions.h"
#include "nn/loss.h"
#include "nn/optimizer_factory.h"
#include "zero/replicated_state.h"

using namespace fathom;
using autograd::Variable;

namespace {

std::shared_ptr<TokenDataset> text_data() {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 64 * 33 + 1; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + (i / 13) * 3) % 97));
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, 32, 256));
}

std::string config_text(const std::string& precision) {
  return R"({"train_micro_batch_size_per_gpu": 8, "gradient_clipping": 1.0, "seed": 3,
             "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}},
             "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-3, "warmup_num_steps": 5}})" +
         precision + "}";
}

std::vector<double> losses(const std::string& precision, int steps) {
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 7);
  Initialized init = initialize(Config::from_string(config_text(precision)), model, nullptr, text_data());
  std::vector<double> out;
  while (static_cast<int>(out.size()) < steps)
    for (const Batch& batch : *init.loader) {
      const auto logits = (*init.engine)(autograd::Variable(batch.inputs), batch.sample_index);
      init.engine->backward(nn::cross_entropy(logits, batch.targets, batch.loss_normaliser));
      init.engine->step();
      out.push_back(init.engine->last_report().loss);
      if (static_cast<int>(out.size()) == steps) break;
    }
  if (!precision.empty()) {
    const auto* state = dynamic_cast<const zero::ReplicatedState*>(&init.engine->training_state());
    REQUIRE(state != nullptr);
    REQUIRE(state->keeps_masters());
    for (const auto& [name, master] : state->updated()) REQUIRE(master.dtype() == DType::F32);
    CHECK(model->parameters()[0].dtype() == (precision.find("bf16") != std::string::npos ? DType::BF16 : DType::F16));
  }
  return out;
}

}  // namespace

TEST_CASE("bf16 and fp16 training stay within 3% of f32 at every step, with f32 masters", "[engine]") {
  const auto f32 = losses("", 50);
  const auto bf16 = losses(R"(, "bf16": {"enabled": true})", 50);
  const auto fp16 = losses(R"(, "fp16": {"enabled": true, "initial_scale_power": 12})", 50);
  for (int s = 0; s < 50; ++s) {
    INFO("step " << s << ": f32 " << f32[s] << ", bf16 " << bf16[s] << ", fp16 " << fp16[s]);
    CHECK(std::fabs(bf16[s] - f32[s]) / f32[s] < 0.03);
    CHECK(std::fabs(fp16[s] - f32[s]) / f32[s] < 0.03);
  }
  CHECK(f32.back() < f32.front() * 0.8);  // it learned something
}

TEST_CASE("an fp16 overflow skips the step: weights, optimizer state and schedule untouched", "[engine]") {
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 7);
  Initialized init = initialize(Config::from_string(config_text(R"(, "fp16": {"enabled": true})")), model, nullptr,
                                text_data());
  Engine& engine = *init.engine;
  auto run_step = [&](const Batch& batch, double loss_multiplier) {
    const auto logits = engine(autograd::Variable(batch.inputs), batch.sample_index);
    engine.backward(autograd::mul(nn::cross_entropy(logits, batch.targets, batch.loss_normaliser), loss_multiplier));
    engine.step();
  };
  auto it = init.loader->begin();
  run_step(*it, 1.0);
  ++it;
  const auto weights = model->state_dict();
  const auto masters = dynamic_cast<const zero::ReplicatedState&>(engine.training_state()).updated();
  std::vector<Tensor> master_before;
  for (const auto& [name, m] : masters) master_before.push_back(m.data().clone());
  const auto state_before = engine.optimizer()->state_dict();
  const int64_t schedule_before = engine.scheduler()->last_batch_iteration();
  const double scale_before = engine.loss_scale();

  run_step(*it, 1e30);  // every gradient overflows in fp16
  CHECK(engine.last_report().skipped);
  CHECK(engine.skipped_steps() == 1);
  CHECK(engine.global_steps() == 2);  // a skipped step still counts, as in DeepSpeed
  CHECK(engine.scheduler()->last_batch_iteration() == schedule_before);
  CHECK(engine.loss_scale() == scale_before);  // hysteresis (2) absorbs the first overflow
  const auto weights_after = model->state_dict();
  for (size_t i = 0; i < weights.size(); ++i)
    CHECK(std::memcmp(weights[i].second.raw_data(), weights_after[i].second.raw_data(), weights[i].second.nbytes()) == 0);
  for (size_t i = 0; i < masters.size(); ++i)
    CHECK(master_before[i].to_vector<float>() == masters[i].second.data().to_vector<float>());
  const auto state_after = engine.optimizer()->state_dict();
  REQUIRE(state_after.tensors.size() == state_before.tensors.size());
  for (size_t i = 0; i < state_before.tensors.size(); ++i)
    CHECK(state_before.tensors[i].second.to_vector<float>() == state_after.tensors[i].second.to_vector<float>());

  ++it;
  run_step(*it, 1e30);  // hysteresis exhausted: the scale halves
  CHECK(engine.loss_scale() == scale_before / 2);
  CHECK(Engine::format_report(engine.last_report(), false).find("skipped 2 (this step: overflow)") != std::string::npos);
}

TEST_CASE("mixed precision rejects what it cannot honour", "[engine]") {
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 7);
  CHECK_THROWS_WITH(Config::from_string(config_text(R"(, "bf16": {"enabled": true}, "fp16": {"enabled": true})")),
                    Catch::Contains("fp16"));
  Config config = Config::from_string(R"({"train_batch_size": 8, "bf16": {"enabled": true}})");
  CHECK_THROWS_WITH(initialize(config, model, nn::make_optimizer("SGD", {{"lr", 0.1}}, model->parameters())),
                    Catch::Contains("with bf16 enabled the engine builds the optimizer over fp32 master weights"));
}

TEST_CASE("bf16 gradient accumulation sums in fp32: micro-batch 2 x 4 matches batch 8 x 1", "[engine]") {
  auto run = [](int64_t micro, int64_t gas) {
    auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 7);
    const std::string text = R"({"train_micro_batch_size_per_gpu": )" + std::to_string(micro) +
                             R"(, "gradient_accumulation_steps": )" + std::to_string(gas) +
                             R"(, "optimizer": {"type": "SGD", "params": {"lr": 0.5}}, "bf16": {"enabled": true}})";
    Initialized init = initialize(Config::from_string(text), model, nullptr, text_data());
    std::vector<double> losses;
    for (const Batch& batch : *init.loader) {
      const auto logits = (*init.engine)(autograd::Variable(batch.inputs), batch.sample_index);
      init.engine->backward(nn::cross_entropy(logits, batch.targets, batch.loss_normaliser));
      const bool boundary = init.engine->is_gradient_accumulation_boundary();
      init.engine->step();
      if (boundary) losses.push_back(init.engine->last_report().loss);
      if (losses.size() == 4) break;
    }
    // The 16-bit gradients were folded into the fp32 masters as each became final.
    for (const Variable& p : model->parameters()) CHECK_FALSE(p.grad().defined());
    return losses;
  };
  const auto whole = run(8, 1), accumulated = run(2, 4);
  REQUIRE(whole.size() == 4);
  REQUIRE(accumulated.size() == 4);
  for (size_t s = 0; s < 4; ++s) {
    INFO("step " << s << ": " << whole[s] << " vs " << accumulated[s]);
    CHECK(std::fabs(whole[s] - accumulated[s]) / whole[s] < 2e-3);
  }
}
