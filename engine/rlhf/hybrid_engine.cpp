#include "engine/rlhf/hybrid_engine.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {
namespace {

// pin_parameters: every parameter whole for the scope (one gather each at stage 3), released
// however the generation ends.
class PinnedParameters {
 public:
  PinnedParameters(zero::ParameterResidency* residency, bool pin) : residency_(pin ? residency : nullptr) {
    if (residency_) residency_->gather_full_parameters();
  }
  ~PinnedParameters() {
    if (residency_) residency_->release_full_parameters();
  }
  PinnedParameters(const PinnedParameters&) = delete;
  PinnedParameters& operator=(const PinnedParameters&) = delete;

 private:
  zero::ParameterResidency* residency_;
};

}  // namespace

HybridEngine::HybridEngine(std::shared_ptr<Engine> engine, HybridEngineConfig config)
    : engine_(std::move(engine)), config_(config) {
  FATHOM_CHECK(engine_, "HybridEngine: no engine");
  model_ = dynamic_cast<models::Decoder*>(&engine_->module());
  FATHOM_CHECK(model_, "HybridEngine: the engine's model is a ", engine_->module().type_name(),
               "; generation needs a whole models::Decoder (not split by tensor or pipeline parallelism)");
  FATHOM_CHECK(config_.inference_tp_size == 1, "hybrid_engine.inference_tp_size ", config_.inference_tp_size,
               " is not supported; set 1");
}

HybridEngine::~HybridEngine() = default;

models::Generated HybridEngine::generate(const Tensor& prompts, models::SamplingOptions sampling, Generator& gen) {
  FATHOM_CHECK(prompts.dim() == 2, "HybridEngine.generate: prompts must be [batch, length], got ", prompts.str());
  const int64_t tokens = prompts.size(1) + sampling.max_new_tokens;
  FATHOM_CHECK(tokens <= config_.max_out_tokens, "hybrid_engine.max_out_tokens is ", config_.max_out_tokens,
               " but ", prompts.size(1), " prompt tokens + ", sampling.max_new_tokens,
               " new ones need ", tokens, "; raise it or generate fewer tokens");
  const int64_t batch = prompts.size(0);
  zero::ParameterResidency* residency = engine_->training_state().residency();
  // Without pinning, the modules' own hooks gather each part for each forward: ranks doing that
  // together must all feed every position.
  if (!pins() && residency && residency->gathers_collectively()) sampling.stop_when_all_ended = false;
  if (!cache_ || cache_->batch() != batch)
    cache_ = std::make_unique<models::KVCache>(
        model_->make_cache(batch, std::min(config_.max_out_tokens, model_->config().max_positions)));
  models::Generated out;
  {
    const PinnedParameters pinned(residency, pins());
    out = models::generate(*model_, *cache_, prompts, sampling, gen);
  }
  if (!config_.enabled || config_.release_inference_cache) cache_.reset();
  return out;
}

}  // namespace fathom
