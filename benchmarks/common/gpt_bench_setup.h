#pragma once
// What the GPT benchmarks (benchmarks/zero, benchmarks/checkpoint) set up alike: the model's
// sizes, a deterministic synthetic token set, and the median of repeated timings.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/data/token_dataset.h"
#include "models/decoder.h"

namespace fathom::bench {

// GPT-2's configuration of the decoder at these sizes, in f32 or bf16.
inline models::DecoderConfig gpt_config(int64_t layers, int64_t heads, int64_t width, int64_t vocab, int64_t block,
                                        bool f32) {
  models::DecoderConfig c = models::DecoderConfig::gpt2(layers, heads, width, vocab, block);
  c.dtype = f32 ? DType::F32 : DType::BF16;
  return c;
}

// `samples` sequences of `block` tokens from a fixed linear congruential stream.
inline std::shared_ptr<TokenDataset> synthetic_tokens(int64_t samples, int64_t block, int64_t vocab) {
  std::vector<uint16_t> tokens(samples * block + 1);
  uint32_t x = 12345;
  for (uint16_t& t : tokens) t = static_cast<uint16_t>((x = x * 1664525u + 1013904223u) >> 16) % vocab;
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, block, vocab));
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace fathom::bench
