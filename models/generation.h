#pragma once
// Batched sampling with the key/value cache: the generation half of an RLHF step (the hybrid
// engine, engine/rlhf/hybrid_engine.h, runs it on the actor's training weights). All prompts of a batch have the same length (the cache has one
// position counter for the batch); each row stops at its own end token, after which it is
// filled with the pad token and masked out.

#include <cstdint>
#include <optional>

#include <functional>

#include "core/generator.h"
#include "models/decoder.h"

namespace fathom::models {

struct SamplingOptions {
  int64_t max_new_tokens = 64;
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: all tokens
  double top_p = 1.0;        // 1: all tokens
  std::optional<int64_t> end_token;  // a row stops after generating it (it is kept, unmasked)
  int64_t pad_token = 0;             // what fills a row after its end
  // false: feed all max_new_tokens positions even when every row has ended (ranks that gather
  // sharded parameters for each forward together must all make the same number of them).
  bool stop_when_all_ended = true;
};

struct Generated {
  Tensor sequences;  // i64 [B, P + L]: prompt then response (L = max_new_tokens), on the host
  Tensor mask;       // f32 [B, L]: 1 on generated tokens, 0 on the padding after a row's end
};

// Per-token values of generated sequences (values [B, P + L], e.g. a reward model's) read at each
// row's last generated token (its first response position if it generated none): f32 [B]. This
// is where DeepSpeed-Chat reads a response's reward-model score.
Tensor last_token_values(const Tensor& values, const Generated& generated, int64_t prompt_length);

// prompts: i64 [B, P], P >= 1, P + max_new_tokens <= max_positions. Row b draws from `gen` in
// row order at each position, so a batch is reproducible from its seed. The model's own
// forward, continued over a KV cache (any architecture, any tensor-parallel size).
Generated generate(Decoder& model, const Tensor& prompts, const SamplingOptions& options, Generator& gen);
// The decoder fed `tokens` (i64 [B, n], any device) at its cache's next n positions: the last
// one's logits [B, vocab]. No graph is recorded.
Tensor next_token_logits(Decoder& model, KVCache& cache, const Tensor& tokens);
// With the caller's cache (its batch must be the prompts'), reset first and kept for the next call.
Generated generate(Decoder& model, KVCache& cache, const Tensor& prompts, const SamplingOptions& options,
                   Generator& gen);
// Draws the next token from logits [vocab] (f32): temperature 0 means greedy; top_k 0 means all;
// top_p < 1 keeps the fewest most likely tokens (after top_k) whose probability reaches top_p.
int64_t sample_token(const Tensor& logits, double temperature, int64_t top_k, Generator& gen, double top_p = 1.0);

// The sampling loop under them: `feed` takes i64 [B, n] tokens at the next n positions and returns
// the last one's logits [B, vocab].
Generated sample(const std::function<Tensor(const Tensor&)>& feed, int64_t max_positions, const Tensor& prompts,
                 const SamplingOptions& options, Generator& gen);

}  // namespace fathom::models
