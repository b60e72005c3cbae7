#pragma once
// Incremental decoding of a models::TensorParallelGPT under tensor parallelism, the same tokens
// as GPTInference on the unsplit model: each rank runs its own attention heads with a key/value
// cache of those heads only ([B, heads / tp, block, head size] per layer), the MLP's slice of
// features, and the LM head over its vocabulary rows; the rank's logits are all-gathered, and the
// padding columns dropped, so every rank holds the whole distribution and draws the same token
// from the same generator. Collective: every rank of the group calls feed() alike.

#include <memory>
#include <vector>

#include "models/gpt_tensor_parallel.h"

namespace fathom::models {

class TensorParallelGPTInference {
 public:
  // The model must be built without sequence parallelism (decoding feeds one position at a time).
  TensorParallelGPTInference(TensorParallelGPT& model, std::shared_ptr<parallel::Communicator> group,
                             int64_t batch = 1);
  // As GPTInference::feed: `tokens` i64 [batch, n] at the next n positions -> the last position's
  // logits, f32 [batch, vocab] (the real vocabulary), the same on every rank.
  Tensor feed(const Tensor& tokens);
  int64_t position() const { return position_; }
  void reset() { position_ = 0; }

 private:
  Tensor block_forward(size_t layer, const Tensor& x);
  TensorParallelGPT& model_;
  std::shared_ptr<parallel::Communicator> group_;
  int64_t batch_;
  Device device_;
  int64_t position_ = 0;
  std::vector<Tensor> keys_, values_;  // per layer: [B, this rank's heads, block_size, HS]
};

}  // namespace fathom::models
