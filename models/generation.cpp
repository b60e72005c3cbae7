#include "models/generation.h"

#include <algorithm>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "models/gpt_inference.h"

namespace fathom::models {

Generated generate(const GPT& model, const Tensor& prompts, const SamplingOptions& options, Generator& gen) {
  GPTInference decoder(model, prompts.dim() == 2 ? prompts.size(0) : 1);
  return generate(decoder, prompts, options, gen);
}

Generated generate(GPTInference& decoder, const Tensor& prompts, const SamplingOptions& options, Generator& gen) {
  FATHOM_CHECK(prompts.dim() != 2 || decoder.batch() == prompts.size(0), "generate: the decoder decodes ",
               decoder.batch(), " rows, the prompts are ", prompts.size(0));
  decoder.reset();
  return sample(
      [&](const Tensor& tokens) { return decoder.feed(tokens); }, decoder.model().config().block_size, prompts, options,
      gen);
}

Generated generate(Decoder& model, const Tensor& prompts, const SamplingOptions& options, Generator& gen) {
  KVCache cache = model.make_cache(prompts.dim() == 2 ? prompts.size(0) : 1);
  return generate(model, cache, prompts, options, gen);
}

Generated generate(Decoder& model, KVCache& cache, const Tensor& prompts, const SamplingOptions& options,
                   Generator& gen) {
  FATHOM_CHECK(prompts.dim() != 2 || cache.batch() == prompts.size(0), "generate: the cache holds ", cache.batch(),
               " rows, the prompts are ", prompts.size(0));
  cache.reset();
  return sample([&](const Tensor& tokens) { return next_token_logits(model, cache, tokens); },
                model.config().max_positions, prompts, options, gen);
}

Tensor next_token_logits(Decoder& model, KVCache& cache, const Tensor& tokens) {
  autograd::NoGradGuard no_grad;
  const Tensor logits = model.forward_cached(Variable(tokens.to(model.device())), cache).data();
  return logits.select(1, logits.size(1) - 1);
}

Generated sample(const std::function<Tensor(const Tensor&)>& feed, int64_t max_positions, const Tensor& prompts,
                 const SamplingOptions& options, Generator& gen) {
  FATHOM_CHECK(prompts.dim() == 2 && prompts.dtype() == DType::I64 && prompts.size(0) >= 1 && prompts.size(1) >= 1,
               "generate: prompts must be i64 [batch, length] with at least one token each, got ", prompts.str());
  const int64_t B = prompts.size(0), P = prompts.size(1), L = options.max_new_tokens;
  FATHOM_CHECK(L >= 1, "generate: max_new_tokens ", L, " must be >= 1");
  FATHOM_CHECK(P + L <= max_positions, "generate: ", P, " prompt tokens + ", L,
               " new ones exceed the model's ", max_positions, " positions",
               "; shorten the prompts or lower max_new_tokens");
  const std::vector<int64_t> prompt = prompts.to(kCPU).contiguous().to_vector<int64_t>();
  std::vector<int64_t> sequences(B * (P + L), options.pad_token);
  std::vector<float> mask(B * L, 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < P; ++t) sequences[b * (P + L) + t] = prompt[b * P + t];

  Tensor logits = feed(prompts.to(kCPU).contiguous()).to(kCPU).to(DType::F32);  // [B, V]
  std::vector<bool> ended(B, false);
  std::vector<int64_t> next(B);
  for (int64_t t = 0; t < L; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t token = sample_token(logits.select(0, b).contiguous(), options.temperature, options.top_k, gen,
                                         options.top_p);
      next[b] = ended[b] ? options.pad_token : token;
      sequences[b * (P + L) + P + t] = next[b];
      if (!ended[b]) mask[b * L + t] = 1.0f;
      if (options.end_token && token == *options.end_token) ended[b] = true;
    }
    if (t + 1 == L) break;
    if (options.stop_when_all_ended && std::all_of(ended.begin(), ended.end(), [](bool e) { return e; })) break;
    logits = feed(Tensor::from_vector(next, {B, 1})).to(kCPU).to(DType::F32);
  }
  return {Tensor::from_vector(sequences, {B, P + L}), Tensor::from_vector(mask, {B, L})};
}

Tensor last_token_values(const Tensor& values, const Generated& generated, int64_t P) {
  const int64_t B = generated.mask.size(0), L = generated.mask.size(1);
  FATHOM_CHECK(values.dim() == 2 && values.size(0) == B && values.size(1) == P + L, "last_token_values: values ",
               values.str(), " do not match ", B, " sequences of ", P, " + ", L, " tokens");
  const std::vector<float> v = values.to(kCPU).to(DType::F32).contiguous().to_vector<float>();
  const std::vector<float> mask = generated.mask.to_vector<float>();
  std::vector<float> out(B);
  for (int64_t b = 0; b < B; ++b) {
    int64_t length = 0;
    while (length < L && mask[b * L + length] != 0) ++length;
    out[b] = v[b * (P + L) + P + std::max<int64_t>(length, 1) - 1];
  }
  return Tensor::from_vector(out, {B});
}

}  // namespace fathom::models
