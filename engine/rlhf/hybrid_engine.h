#pragma once
// DeepSpeed's hybrid engine: the RLHF actor's training engine also generates, with the very
// weights it trains (no copy, no second model). Between training steps, generate() runs batched
// sampling with the key/value cache (models/generation.h) over the engine's model, the one
// decoder (any architecture), with the same forward it trains with.
//
// At ZeRO-3 the parameters are sharded. With pin_parameters (the default) every one is gathered
// once before a generation and released after it; without, the modules' own stage-3 hooks gather
// each part of the model for each forward and release it after: less memory, a gather per part
// per generated token. In a job of several ranks that gather per forward, each rank then feeds
// all max_new_tokens positions, so that their collectives pair up.
//
// "enabled": false still generates, as DeepSpeed-Chat does without the hybrid engine:
// parameters gathered part by part for each forward, the cache freed after each generation.
// release_inference_cache: free the cache after each generation (otherwise kept for the next of
// the same batch size). max_out_tokens bounds prompt + generated tokens. inference_tp_size other
// than 1 is refused when the config is read.

#include <memory>

#include "core/generator.h"
#include "engine/config/config.h"
#include "engine/engine.h"
#include "models/generation.h"

namespace fathom {

class HybridEngine {
 public:
  // `engine`'s module must be a models::Decoder (not split by tensor or pipeline parallelism).
  HybridEngine(std::shared_ptr<Engine> engine, HybridEngineConfig config);
  ~HybridEngine();

  // prompts: i64 [B, P] on the host. Collective at ZeRO-3: every rank of the data group calls it.
  models::Generated generate(const Tensor& prompts, models::SamplingOptions sampling, Generator& gen);

  Engine& engine() const { return *engine_; }

  const HybridEngineConfig& config() const { return config_; }

 private:
  bool pins() const { return config_.enabled && config_.pin_parameters; }

  std::shared_ptr<Engine> engine_;
  models::Decoder* model_ = nullptr;
  HybridEngineConfig config_;
  std::unique_ptr<models::KVCache> cache_;  // kept between generations unless released
};

}  // namespace fathom
