// The hybrid engine (engine/rlhf/hybrid_engine.h) at ZeRO-3, at this world size (CTest runs 1 and 2
// ranks): pin_parameters gathers each parameter once per generation, without it once per
// forward; either way the tokens are the unsharded model's with the same weights and seed, ranks
// whose rows end at different times still pair their gathers, and training after a generation
// is training without one.
#include "engine/rlhf/hybrid_engine.h"
#include "engine/initialize.h"
#include "models/generation.h"
#include "mpi_test_util.h"
#include "nn/loss.h"
#include "test_util.h"
#include "zero/sharded_state.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::error_of;
using fathom::testing::runtime;

namespace {

constexpr uint64_t kSeed = 3;

// GPT-2's configuration of the decoder (tied embeddings: the head gathers the table again).
models::DecoderConfig tiny() {
  models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
  c.max_positions = 16;
  return c;
}

Config zero3_config(const std::string& hybrid) {
  return Config::from_string(detail::concat(
      R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}, "hybrid_engine": )",
      hybrid, "}"));
}

struct Actor {
  std::shared_ptr<models::Decoder> model = std::make_shared<models::Decoder>(tiny(), kSeed);
  Config config;
  std::shared_ptr<Engine> engine;
  std::unique_ptr<HybridEngine> hybrid;

  explicit Actor(const std::string& hybrid_section) : config(zero3_config(hybrid_section)) {
    engine = initialize(config, model, nullptr, nullptr, runtime().world_ptr()).engine;
    hybrid = std::make_unique<HybridEngine>(engine, config.hybrid_engine);
  }
  int64_t gathers() const {
    return dynamic_cast<const zero::ShardedState&>(engine->training_state()).gatherer()->gathers_issued();
  }
};

// Each rank its own prompts.
Tensor prompts_of_rank() {
  const int64_t r = runtime().world().rank();
  return Tensor::from_vector<int64_t>({3 + r, 7, 1, 9, 20 + r, 4, 4, 2}, {2, 4});
}

void train_steps(Engine& engine, int steps) {
  const int64_t r = runtime().world().rank();
  const Tensor inputs = Tensor::from_vector<int64_t>({1, 2, 3, 4 + r, 5, 6, 7, 8 + r}, {2, 4});
  const Tensor targets = Tensor::from_vector<int64_t>({2, 3, 4 + r, 5, 6, 7, 8 + r, 9}, {2, 4});
  for (int s = 0; s < steps; ++s) {
    engine.backward(nn::cross_entropy(engine(autograd::Variable(inputs)), targets));
    engine.step();
  }
}

}  // namespace

TEST_CASE("hybrid engine at ZeRO-3: pinned, one gather per parameter per generation; unpinned, one per forward",
          "[hybrid_engine]") {
  models::SamplingOptions sampling;
  sampling.max_new_tokens = 6;
  models::Decoder plain(tiny(), kSeed);
  Generator plain_gen(40 + runtime().world().rank());
  const models::Generated expected = models::generate(plain, prompts_of_rank(), sampling, plain_gen);

  for (const bool pin : {true, false}) {
    INFO("pin_parameters " << pin << ", " << runtime().world().size() << " ranks");
    Actor actor(detail::concat(R"({"enabled": true, "pin_parameters": )", pin ? "true" : "false", "}"));
    const int64_t parameters = static_cast<int64_t>(actor.model->named_parameters().size());
    for (int generation = 0; generation < 2; ++generation) {
      Generator gen(40 + runtime().world().rank());
      const int64_t before = actor.gathers();
      const models::Generated out = actor.hybrid->generate(prompts_of_rank(), sampling, gen);
      const int64_t gathers = actor.gathers() - before;
      CHECK(out.sequences.to_vector<int64_t>() == expected.sequences.to_vector<int64_t>());
      CHECK(out.mask.to_vector<float>() == expected.mask.to_vector<float>());
      // Unpinned, every forward (the prompt's, then one per further token) gathers each part; the
      // head gathers the token embedding again (tied).
      CHECK(gathers == (pin ? parameters : sampling.max_new_tokens * (parameters + 1)));
      CHECK(actor.model->named_parameters()[0].second.numel() == 0);  // released after the generation
    }
    fathom::testing::require_stage3_partitioned(*actor.engine);
  }
}

TEST_CASE("hybrid engine: rows ending at different steps on different ranks still gather together",
          "[hybrid_engine]") {
  models::SamplingOptions sampling;
  sampling.max_new_tokens = 8;
  models::Decoder plain(tiny(), kSeed);
  // An end token the first rank's rows are likely to draw early: the most likely next token of
  // its first prompt.
  Generator probe(1);
  sampling.end_token = models::generate(plain, Tensor::from_vector<int64_t>({3, 7, 1, 9}, {1, 4}),
                                        {.max_new_tokens = 1, .temperature = 0}, probe)
                           .sequences.to_vector<int64_t>()[4];
  for (const char* hybrid : {R"({"enabled": true, "pin_parameters": false})", R"({"enabled": false})"}) {
    INFO(hybrid);
    Actor actor(hybrid);
    Generator gen(5 + runtime().world().rank()), plain_gen(5 + runtime().world().rank());
    const models::Generated out = actor.hybrid->generate(prompts_of_rank(), sampling, gen);
    const models::Generated expected = models::generate(plain, prompts_of_rank(), sampling, plain_gen);
    CHECK(out.sequences.to_vector<int64_t>() == expected.sequences.to_vector<int64_t>());
    CHECK(out.mask.to_vector<float>() == expected.mask.to_vector<float>());
    fathom::testing::require_stage3_partitioned(*actor.engine);
  }
}

TEST_CASE("hybrid engine: training after a generation equals training without it", "[hybrid_engine]") {
  for (const char* hybrid : {R"({"enabled": true})", R"({"enabled": true, "pin_parameters": false})"}) {
    INFO(hybrid);
    Actor generated(hybrid), untouched(hybrid);
    train_steps(*generated.engine, 1);
    train_steps(*untouched.engine, 1);
    models::SamplingOptions sampling;
    sampling.max_new_tokens = 4;
    Generator gen(8);
    generated.hybrid->generate(prompts_of_rank(), sampling, gen);
    train_steps(*generated.engine, 2);
    train_steps(*untouched.engine, 2);
    fathom::testing::require_stage3_partitioned(*generated.engine);
    fathom::testing::require_stage3_partitioned(*untouched.engine);
    const nn::NamedTensors a = generated.engine->consolidated_state_dict(), b = untouched.engine->consolidated_state_dict();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(a[i].second.to_vector<float>() == b[i].second.to_vector<float>());
    }
  }
}

TEST_CASE("hybrid_engine config: DeepSpeed's defaults, inference_tp_size refused, max_out_tokens enforced",
          "[hybrid_engine]") {
  const Config defaults = zero3_config("{}");
  CHECK_FALSE(defaults.hybrid_engine.enabled);
  CHECK(defaults.hybrid_engine.max_out_tokens == 512);
  CHECK(defaults.hybrid_engine.pin_parameters);
  CHECK_FALSE(defaults.hybrid_engine.release_inference_cache);
  CHECK(defaults.hybrid_engine.inference_tp_size == 1);
  CHECK(defaults.hybrid_engine.tp_gather_partition_size == 8);
  const std::string tp = error_of([] { zero3_config(R"({"enabled": true, "inference_tp_size": 2})"); });
  CHECK(tp.find("hybrid_engine.inference_tp_size") != std::string::npos);
  CHECK(tp.find("set 1") != std::string::npos);
  CHECK(error_of([] { zero3_config(R"({"enabled": true, "pin_parameter": true})"); }).find("pin_parameters") !=
        std::string::npos);  // a misspelt key is refused, with the right one suggested

  Actor actor(R"({"enabled": true, "max_out_tokens": 8})");
  models::SamplingOptions sampling;
  sampling.max_new_tokens = 6;
  Generator gen(1);
  CHECK(error_of([&] { actor.hybrid->generate(prompts_of_rank(), sampling, gen); }) ==
        "hybrid_engine.max_out_tokens is 8 but 4 prompt tokens + 6 new ones need 10; raise it or generate fewer tokens");
}

TEST_CASE("hybrid engine with a Llama (GQA, RoPE, untied): at ZeRO-3, pinned or not, the unsharded model's tokens",
          "[hybrid_engine]") {
  models::DecoderConfig config = models::DecoderConfig::preset("llama-tiny");
  config.max_positions = 16;
  models::SamplingOptions sampling;
  sampling.max_new_tokens = 6;
  models::Decoder plain(config, kSeed);
  Generator plain_gen(40 + runtime().world().rank());
  const models::Generated expected = models::generate(plain, prompts_of_rank(), sampling, plain_gen);
  for (const bool pin : {true, false}) {
    INFO("pin_parameters " << pin << ", " << runtime().world().size() << " ranks");
    auto model = std::make_shared<models::Decoder>(config, kSeed);
    const Config zero3 = zero3_config(detail::concat(R"({"enabled": true, "pin_parameters": )", pin ? "true" : "false", "}"));
    const std::shared_ptr<Engine> engine = initialize(zero3, model, nullptr, nullptr, runtime().world_ptr()).engine;
    HybridEngine hybrid(engine, zero3.hybrid_engine);
    for (int generation = 0; generation < 2; ++generation) {
      Generator gen(40 + runtime().world().rank());
      const models::Generated out = hybrid.generate(prompts_of_rank(), sampling, gen);
      CHECK(out.sequences.to_vector<int64_t>() == expected.sequences.to_vector<int64_t>());
      CHECK(model->named_parameters()[0].second.numel() == 0);  // released after the generation
    }
    train_steps(*engine, 1);  // and it trains on after generating
    fathom::testing::require_stage3_partitioned(*engine);
  }
}
