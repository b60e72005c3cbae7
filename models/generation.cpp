#include "models/generation.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"

namespace fathom::models {

int64_t sample_token(const Tensor& logits, double temperature, int64_t top_k, Generator& gen, double top_p) {
  FATHOM_CHECK(top_p > 0 && top_p <= 1, "sample_token: top_p ", top_p,
               " must be in (0, 1] (1 keeps every token; 0.9 keeps the most likely ones that make up 90%)");
  std::vector<float> values = logits.to_vector<float>();
  const int64_t V = static_cast<int64_t>(values.size());
  if (temperature <= 0) return std::max_element(values.begin(), values.end()) - values.begin();
  std::vector<int64_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  int64_t k = top_k > 0 ? std::min(top_k, V) : V;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int64_t a, int64_t b) { return values[a] > values[b]; });
  const double top = values[order[0]];
  std::vector<double> weights(k);
  double total = 0;
  for (int64_t i = 0; i < k; ++i) total += weights[i] = std::exp((values[order[i]] - top) / temperature);
  if (top_p < 1) {  // nucleus: the fewest most likely tokens whose probability reaches top_p
    double kept = 0;
    for (int64_t i = 0; i < k; ++i)
      if ((kept += weights[i]) >= top_p * total) {
        k = i + 1;
        total = kept;
        break;
      }
  }
  const double u = uniform({1}, gen, 0.0, 1.0, DType::F64).item() * total;
  double acc = 0;
  for (int64_t i = 0; i < k; ++i)
    if ((acc += weights[i]) >= u) return order[i];
  return order[k - 1];
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
