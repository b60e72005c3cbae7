#pragma once
// DeepSpeed's hybrid engine: the RLHF actor's training engine also generates, with the very
// weights it trains (no copy, no second model). Between training steps, generate() runs batched
// sampling with the key/value cache (models/generation.h) over the engine's GPT.
//
// At ZeRO-3 the parameters are sharded. With pin_parameters (the default) every one is gathered
// once before a generation and released after it; without, each part of the model (embeddings,
// each block, the head) is gathered for each forward and released after it: less memory, a
// gather per part per generated token. In a job of several ranks that gather per forward, each
// rank then feeds all max_new_tokens positions, so that their collectives pair up.
//
// "enabled": false still generates, as DeepSpeed-Chat does without the hybrid engine:
// parameters gathered part by part for each forward, the cache freed after each generation.
// release_inference_cache: free the cache after each generation (otherwise kept for the next of
// the same batch size). max_out_tokens bounds prompt + generated tokens. inference_tp_size other
// than 1 is refused when the config is read.
//
// The model is a models::GPT (read by GPTInference) or a decoder of the Llama family
// (models::Decoder), which generates with its own forward over a KV cache: at ZeRO-3 its modules'
// own gather hooks make each part whole for each forward, as pin_parameters false does.

#include <memory>

#include "core/generator.h"
#include "engine/config/config.h"
#include "engine/engine.h"
#include "models/generation.h"

namespace fathom {

class HybridEngine {
 public:
  // `engine`'s module must be a models::GPT or a models::Decoder (not split by tensor or pipeline
  // parallelism).
  HybridEngine(std::shared_ptr<Engine> engine, HybridEngineConfig config);
  ~HybridEngine();

  // prompts: i64 [B, P] on the host. Collective at ZeRO-3: every rank of the data group calls it.
  models::Generated generate(const Tensor& prompts, models::SamplingOptions sampling, Generator& gen);

  Engine& engine() const { return *engine_; }

  const HybridEngineConfig& config() const { return config_; }

 private:
  bool pins() const { return config_.enabled && config_.pin_parameters; }

  std::shared_ptr<Engine> engine_;
  models::GPT* model_ = nullptr;
  models::Decoder* decoder_model_ = nullptr;
  std::unique_ptr<models::KVCache> cache_;  // the decoder's, kept like decoder_
  HybridEngineConfig config_;
  std::unique_ptr<models::ParameterAccess> access_;  // stage 3: gathers part by part (when not pinning)
  std::unique_ptr<models::GPTInference> decoder_;    // kept between generations unless released
};

}  // namespace fathom
