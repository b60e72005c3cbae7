#include "engine/rlhf/hybrid_engine.h"

#include "core/error.h"

namespace fathom {
namespace {

// Each part of the model whole while a feed reads it (stage 3 gathers; no-op below).
class TrainingStateAccess final : public models::ParameterAccess {
 public:
  explicit TrainingStateAccess(zero::TrainingState& state) : state_(state) {}
  void acquire(const nn::Module& part) override { state_.gather_parameters_of(part); }
  void release(const nn::Module& part) override { state_.release_parameters_of(part); }

 private:
  zero::TrainingState& state_;
};

// pin_parameters: every parameter whole for the scope (one gather each at stage 3), released
// however the generation ends.
class PinnedParameters {
 public:
  PinnedParameters(zero::TrainingState& state, bool pin) : state_(pin ? &state : nullptr) {
    if (state_) state_->gather_full_parameters();
  }
  ~PinnedParameters() {
    if (state_) state_->release_full_parameters();
  }
  PinnedParameters(const PinnedParameters&) = delete;
  PinnedParameters& operator=(const PinnedParameters&) = delete;

 private:
  zero::TrainingState* state_;
};

}  // namespace

HybridEngine::HybridEngine(std::shared_ptr<Engine> engine, HybridEngineConfig config)
    : engine_(std::move(engine)), config_(config) {
  FATHOM_CHECK(engine_, "HybridEngine: no engine");
  model_ = dynamic_cast<models::GPT*>(&engine_->module());
  FATHOM_CHECK(model_, "HybridEngine: the engine's model is a ", engine_->module().type_name(),
               "; generation needs a whole models::GPT (not split by tensor or pipeline parallelism)");
  FATHOM_CHECK(config_.inference_tp_size == 1, "hybrid_engine.inference_tp_size ", config_.inference_tp_size,
               " is not supported; set 1");
  access_ = std::make_unique<TrainingStateAccess>(engine_->training_state());
}

HybridEngine::~HybridEngine() = default;

models::Generated HybridEngine::generate(const Tensor& prompts, models::SamplingOptions sampling, Generator& gen) {
  FATHOM_CHECK(prompts.dim() == 2, "HybridEngine.generate: prompts must be [batch, length], got ", prompts.str());
  const int64_t tokens = prompts.size(1) + sampling.max_new_tokens;
  FATHOM_CHECK(tokens <= config_.max_out_tokens, "hybrid_engine.max_out_tokens is ", config_.max_out_tokens,
               " but ", prompts.size(1), " prompt tokens + ", sampling.max_new_tokens,
               " new ones need ", tokens, "; raise it or generate fewer tokens");
  const int64_t batch = prompts.size(0);
  zero::TrainingState& state = engine_->training_state();
  // Ranks gathering part by part together must all feed every position.
  if (!pins() && state.gathers_collectively()) sampling.stop_when_all_ended = false;
  if (!decoder_ || decoder_->batch() != batch)
    decoder_ = std::make_unique<models::GPTInference>(*model_, batch, pins() ? nullptr : access_.get());

  models::Generated out;
  {
    const PinnedParameters pinned(state, pins());
    out = models::generate(*decoder_, prompts, sampling, gen);
  }
  if (!config_.enabled || config_.release_inference_cache) decoder_.reset();
  return out;
}

}  // namespace fathom
