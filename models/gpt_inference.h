#pragma once
// Incremental GPT inference with a key/value cache: each new token costs one position (its
// query attends to the cached keys and values of every earlier position), not a full
// forward over the prefix. No graph is recorded. Used by fathom-generate.

#include <vector>

#include "core/generator.h"
#include "models/gpt.h"

namespace fathom::models {

// Where a feed's parameters come from, part by part (the embeddings, each block, the final norm
// with the head): a model whose parameters are not all resident — ZeRO-3 in the hybrid engine
// without pin_parameters — makes each part whole just before the feed reads it and lets it go
// after. Null: every parameter is resident.
class ParameterAccess {
 public:
  virtual ~ParameterAccess() = default;
  virtual void acquire(const nn::Module& part) = 0;
  virtual void release(const nn::Module& part) = 0;
};

class GPTInference {
 public:
  // batch: sequences decoded together. The cache lives on the model's device.
  GPTInference(const GPT& model, int64_t batch = 1, ParameterAccess* access = nullptr);
  int64_t batch() const { return batch_; }
  const GPT& model() const { return model_; }
  // Feeds `tokens` (i64 [batch, n]) at the next n positions; returns the logits of the last one
  // (f32 [batch, vocab], on the model's device; tokens may be on the host). Throws when the cache
  // (block_size positions) would overflow.
  Tensor feed(const Tensor& tokens);
  int64_t position() const { return position_; }
  void reset() { position_ = 0; }

 private:
  Tensor block_forward(size_t layer, const Tensor& x);  // x: [B, n, C]
  const GPT& model_;
  int64_t batch_;
  ParameterAccess* access_;
  Device device_;
  int64_t position_ = 0;
  std::vector<Tensor> keys_, values_;  // per layer: [B, NH, block_size, HS]
};

// One layer's attention of n new positions against its key/value cache (each [B, H, block, HS]):
// writes the new keys and values (q, k, v: [B, H, n, HS]) at [position, position + n) and returns
// what the queries attend to, causally, [B, H, n, HS]. Shared by the tensor-parallel decoder,
// whose cache holds its own heads.
Tensor cached_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_cache,
                        const Tensor& value_cache, int64_t position);

// Draws the next token from logits [vocab] (f32): temperature 0 means greedy; top_k 0 means all;
// top_p < 1 keeps the fewest most likely tokens (after top_k) whose probability reaches top_p.
int64_t sample_token(const Tensor& logits, double temperature, int64_t top_k, Generator& gen, double top_p = 1.0);

}  // namespace fathom::models
