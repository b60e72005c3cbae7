#include <catch2/catch.hpp>

#include <vector>

#include "models/generation.h"

using namespace fathom;

namespace {
// GPT-2's configuration of the decoder (the Llama family's generation is tested in test_decoder).
models::DecoderConfig tiny() {
  models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
  c.vocab_size = 32;
  c.max_positions = 24;
  return c;
}

// Greedy decoding by full forwards over the growing sequence: the reference for the cache.
std::vector<int64_t> greedy_by_full_forward(models::Decoder& model, std::vector<int64_t> ids, int64_t steps) {
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t T = static_cast<int64_t>(ids.size());
    const auto logits = model(autograd::Variable(Tensor::from_vector(ids, {1, T}))).data().to_vector<float>();
    const int64_t V = model.config().vocab_size;
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (logits[(T - 1) * V + v] > logits[(T - 1) * V + best]) best = v;
    ids.push_back(best);
  }
  return ids;
}
}  // namespace

TEST_CASE("batched greedy generation equals each row decoded alone by full forwards", "[models][rlhf]") {
  models::Decoder model(tiny(), 3);
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {7, 7, 9}, {30, 4, 12}};
  std::vector<int64_t> flat;
  for (const auto& p : prompts) flat.insert(flat.end(), p.begin(), p.end());
  models::SamplingOptions options;
  options.max_new_tokens = 6;
  options.temperature = 0;
  Generator gen(0);
  const models::Generated out = models::generate(model, Tensor::from_vector(flat, {3, 3}), options, gen);
  REQUIRE(out.sequences.sizes() == Shape{3, 9});
  const auto sequences = out.sequences.to_vector<int64_t>();
  for (int b = 0; b < 3; ++b) {
    const auto expected = greedy_by_full_forward(model, prompts[b], 6);
    CHECK(std::vector<int64_t>(sequences.begin() + b * 9, sequences.begin() + (b + 1) * 9) == expected);
  }
  CHECK(out.mask.to_vector<float>() == std::vector<float>(18, 1.0f));
}

TEST_CASE("a row that generates the end token stops there, padded and masked after it", "[models][rlhf]") {
  models::Decoder model(tiny(), 3);
  const Tensor prompts = Tensor::from_vector<int64_t>({1, 2, 3, 7, 7, 9}, {2, 3});
  models::SamplingOptions options;
  options.max_new_tokens = 5;
  options.temperature = 0;
  Generator gen(0);
  const auto free_run = models::generate(model, prompts, options, gen).sequences.to_vector<int64_t>();
  options.end_token = free_run[3];  // row 0's first generated token
  options.pad_token = 31;
  const models::Generated out = models::generate(model, prompts, options, gen);
  const auto sequences = out.sequences.to_vector<int64_t>();
  const auto mask = out.mask.to_vector<float>();
  CHECK(sequences[3] == free_run[3]);  // the end token is kept
  CHECK(mask[0] == 1.0f);
  for (int t = 1; t < 5; ++t) {
    CHECK(sequences[3 + t] == 31);
    CHECK(mask[t] == 0.0f);
  }
  // Row 1 (generated tokens at 11..15 of the free run) runs on until it produces that token.
  bool ended = false;
  for (int t = 0; t < 5; ++t) {
    CHECK(mask[5 + t] == (ended ? 0.0f : 1.0f));
    if (free_run[11 + t] == *options.end_token) ended = true;
  }
}

TEST_CASE("sampled generation is reproducible from its seed, and refuses an overflowing length", "[models][rlhf]") {
  models::Decoder model(tiny(), 3);
  const Tensor prompts = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  models::SamplingOptions options;
  options.max_new_tokens = 8;
  options.top_k = 10;
  options.top_p = 0.9;
  Generator a(5), b(5);
  CHECK(models::generate(model, prompts, options, a).sequences.to_vector<int64_t>() ==
        models::generate(model, prompts, options, b).sequences.to_vector<int64_t>());
  options.max_new_tokens = 23;
  CHECK_THROWS_WITH(models::generate(model, prompts, options, a), Catch::Contains("exceed the model's 24 positions"));
}
