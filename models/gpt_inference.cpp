#include "models/gpt_inference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/grad_mode.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/normalization.h"
#include "kernels/softmax.h"

namespace fathom::models {
namespace {

Tensor linear(const Tensor& x, const nn::Linear& layer) {  // x [.., in] -> [.., out]
  Tensor y = matmul(x, layer.weight.data(), false, /*transpose_b=*/true);
  return layer.bias.defined() ? add(y, layer.bias.data()) : y;
}

Tensor layernorm(const Tensor& x, const nn::LayerNorm& norm) {
  return fathom::layernorm(x, norm.weight.data(), norm.bias.defined() ? norm.bias.data() : Tensor(), norm.eps).y;
}

// The parts a feed reads, each acquired for the scope's life.
class PartScope {
 public:
  PartScope(ParameterAccess* access, std::initializer_list<const nn::Module*> parts) : access_(access), parts_(parts) {
    if (access_)
      for (const nn::Module* part : parts_) access_->acquire(*part);
  }
  ~PartScope() {
    if (access_)
      for (const nn::Module* part : parts_) access_->release(*part);
  }
  PartScope(const PartScope&) = delete;
  PartScope& operator=(const PartScope&) = delete;

 private:
  ParameterAccess* access_;
  std::vector<const nn::Module*> parts_;
};

}  // namespace

GPTInference::GPTInference(const GPT& model, int64_t batch, ParameterAccess* access)
    : model_(model), batch_(batch), access_(access), device_(model.device()) {
  const GPTConfig& c = model.config();
  const int64_t HS = c.n_embd / c.n_head;
  // The weights' dtype, which an engine may have changed from the config's (bf16 training).
  const DType dtype = model.transformer->wte->weight.data().dtype();
  for (int64_t l = 0; l < c.n_layer; ++l) {
    keys_.push_back(Tensor::zeros({batch, c.n_head, c.block_size, HS}, dtype, device_));
    values_.push_back(Tensor::zeros({batch, c.n_head, c.block_size, HS}, dtype, device_));
  }
}

Tensor GPTInference::block_forward(size_t layer, const Tensor& x) {
  const auto& block = static_cast<const nn::TransformerBlock&>((*model_.transformer->h)[layer]);
  const GPTConfig& c = model_.config();
  const int64_t B = x.size(0), n = x.size(1), NH = c.n_head, HS = c.n_embd / c.n_head;

  // Attention: new queries against every cached position up to their own.
  const Tensor qkv = linear(layernorm(x, *block.ln_1), *block.attn->c_attn);  // [B, n, 3C]
  auto heads = [&](int64_t part) {                                            // [B, n, C] slice -> [B, NH, n, HS]
    return qkv.narrow(2, part * c.n_embd, c.n_embd).reshape({B, n, NH, HS}).permute({0, 2, 1, 3});
  };
  const Tensor attended = cached_attention(heads(0), heads(1), heads(2), keys_[layer], values_[layer], position_);
  const Tensor merged = attended.permute({0, 2, 1, 3}).contiguous().reshape({B, n, c.n_embd});
  const Tensor h = add(x, linear(merged, *block.attn->c_proj));
  const Tensor mlp = linear(gelu(linear(layernorm(h, *block.ln_2), *block.mlp->c_fc)), *block.mlp->c_proj);
  return add(h, mlp);
}

Tensor GPTInference::feed(const Tensor& tokens) {
  autograd::NoGradGuard no_grad;
  const GPTConfig& c = model_.config();
  FATHOM_CHECK(tokens.dim() == 2 && tokens.size(0) == batch_ && tokens.dtype() == DType::I64,
               "GPTInference.feed: expected i64 tokens [", batch_, ", n], got ", tokens.str());
  const int64_t n = tokens.size(1);
  FATHOM_CHECK(n >= 1 && position_ + n <= c.block_size, "GPTInference.feed: ", position_ + n,
               " positions exceed the model's block_size ", c.block_size, " (start a new sequence with reset())");
  const Tensor positions = add(Tensor::arange(n, DType::I64, device_), static_cast<double>(position_));
  const GPT::Transformer& t = *model_.transformer;
  Tensor x;
  {
    PartScope embeddings(access_, {t.wte.get(), t.wpe.get()});
    x = add(embedding(tokens.to(device_), t.wte->weight.data()), embedding(positions, t.wpe->weight.data()));
  }
  for (size_t l = 0; l < keys_.size(); ++l) {
    PartScope block(access_, {&(*t.h)[l]});
    x = block_forward(l, x);
  }
  position_ += n;
  // The head's weight is the token embedding's when they are tied: acquiring both is harmless.
  PartScope head(access_, {t.ln_f.get(), model_.lm_head.get()});
  const Tensor last = layernorm(x.narrow(1, n - 1, 1), *t.ln_f);  // [B, 1, C]
  return linear(last, *model_.lm_head).reshape({batch_, c.vocab_size}).to(DType::F32);
}

Tensor cached_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_cache,
                        const Tensor& value_cache, int64_t position) {
  const int64_t n = q.size(2), end = position + n, HS = q.size(3);
  key_cache.narrow(2, position, n).copy_(k);
  value_cache.narrow(2, position, n).copy_(v);
  const Tensor keys = key_cache.narrow(2, 0, end), values = value_cache.narrow(2, 0, end);
  Tensor scores = mul(matmul(q, keys, false, true), 1.0 / std::sqrt(static_cast<double>(HS)));  // [B, H, n, end]
  if (n > 1) {  // causal mask among the new positions
    Tensor mask = Tensor::zeros({n, end});
    float* m = mask.data<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = position + i + 1; j < end; ++j) m[i * end + j] = -INFINITY;
    scores = add(scores, mask.to(scores.dtype()).to(q.device()));
  }
  return matmul(softmax(scores), values);
}

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

}  // namespace fathom::models
