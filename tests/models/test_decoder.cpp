// The decoder configured by data against an f64 reference written out loop by loop here, for
// the Llama family's choices (GQA, RoPE with scaling, biases, sliding window, tied or untied
// embeddings, LayerNorm or RMSNorm, gated SiLU or GELU), plus its parameter count, partial
// builds and a gradient check.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <numbers>

#include "autograd/functions.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/generator.h"
#include "models/decoder.h"
#include "nn/deferred_init.h"
#include "parallel/local_communicator.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::models;

namespace {

using Vec = std::vector<double>;

// y = W x (+ b), W [out, in] as nn::Linear stores it.
Vec linear(const Decoder& model, const std::string& name, const Vec& x, bool bias) {
  const Vec w = model.parameter(name + ".weight").data().to_vector<double>();
  const size_t in = x.size(), out = w.size() / in;
  Vec b = bias ? model.parameter(name + ".bias").data().to_vector<double>() : Vec(out, 0.0);
  Vec y(out);
  for (size_t o = 0; o < out; ++o) {
    double s = b[o];
    for (size_t i = 0; i < in; ++i) s += w[o * in + i] * x[i];
    y[o] = s;
  }
  return y;
}

Vec norm(const Decoder& model, const std::string& name, const Vec& x) {
  const DecoderConfig& c = model.config();
  const Vec w = model.parameter(name + ".weight").data().to_vector<double>();
  const double n = static_cast<double>(x.size());
  Vec y(x.size());
  if (c.norm == Norm::RMSNorm) {
    double ms = 0;
    for (double v : x) ms += v * v / n;
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + c.norm_eps) * w[i];
    return y;
  }
  const Vec b = model.parameter(name + ".bias").data().to_vector<double>();
  double mean = 0, var = 0;
  for (double v : x) mean += v / n;
  for (double v : x) var += (v - mean) * (v - mean) / n;
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + c.norm_eps) * w[i] + b[i];
  return y;
}

// Hugging Face's frequencies, in f64 (the model computes them in f32).
Vec reference_inv_freq(const DecoderConfig& c) {
  const int64_t HD = c.resolved_head_dim(), R = c.rope.rotary_dim ? c.rope.rotary_dim : HD;
  Vec f;
  for (int64_t i = 0; i < R / 2; ++i) f.push_back(1.0 / std::pow(c.rope.theta, 2.0 * i / R));
  const nn::RopeScaling& s = c.rope.scaling;
  for (double& x : f) {
    if (s.type == "linear") x /= s.factor;
    if (s.type != "llama3") continue;
    const double wavelen = 2 * std::numbers::pi / x, L = static_cast<double>(s.original_max_positions);
    if (wavelen > L / s.low_freq_factor) {
      x /= s.factor;
    } else if (wavelen >= L / s.high_freq_factor) {
      const double smooth = (L / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      x = (1 - smooth) * x / s.factor + smooth * x;
    }
  }
  return f;
}

// Rotate-half on the first R dims of one head at `pos`.
void rotate(double* head, int64_t pos, const Vec& inv_freq) {
  const size_t half = inv_freq.size();
  for (size_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(pos) * inv_freq[i], x0 = head[i], x1 = head[i + half];
    head[i] = x0 * std::cos(a) - x1 * std::sin(a);
    head[i + half] = x1 * std::cos(a) + x0 * std::sin(a);
  }
}

// logits (T, V) of one row of token ids.
std::vector<Vec> reference_forward(const Decoder& model, const std::vector<int64_t>& ids) {
  const DecoderConfig& c = model.config();
  const int64_t T = static_cast<int64_t>(ids.size()), C = c.hidden_size, HD = c.resolved_head_dim();
  const int64_t group = c.n_head / c.n_kv_head;
  const Vec embed = model.parameter("model.embed_tokens.weight").data().to_vector<double>();
  std::vector<Vec> h(T, Vec(C));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < C; ++i) h[t][i] = embed[ids[t] * C + i];
  if (c.positions == Positions::Learned) {
    const Vec pos = model.parameter("model.embed_positions.weight").data().to_vector<double>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < C; ++i) h[t][i] += pos[t * C + i];
  }
  const Vec inv_freq = reference_inv_freq(c);
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    std::vector<Vec> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      const Vec x = norm(model, p + "input_layernorm", h[t]);
      q[t] = linear(model, p + "self_attn.q_proj", x, c.qkv_bias);
      k[t] = linear(model, p + "self_attn.k_proj", x, c.qkv_bias);
      v[t] = linear(model, p + "self_attn.v_proj", x, c.qkv_bias);
      if (c.positions == Positions::Rotary) {
        for (int64_t head = 0; head < c.n_head; ++head) rotate(&q[t][head * HD], t, inv_freq);
        for (int64_t head = 0; head < c.n_kv_head; ++head) rotate(&k[t][head * HD], t, inv_freq);
      }
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec y(c.n_head * HD, 0.0);
      for (int64_t head = 0; head < c.n_head; ++head) {
        const int64_t kv = head / group;
        const int64_t first = c.sliding_window > 0 ? std::max<int64_t>(0, t - c.sliding_window + 1) : 0;
        Vec score;
        double top = -1e300;
        for (int64_t j = first; j <= t; ++j) {
          double s = 0;
          for (int64_t d = 0; d < HD; ++d) s += q[t][head * HD + d] * k[j][kv * HD + d];
          score.push_back(s / std::sqrt(static_cast<double>(HD)));
          top = std::max(top, score.back());
        }
        double total = 0;
        for (double& s : score) total += (s = std::exp(s - top));
        for (int64_t j = first; j <= t; ++j)
          for (int64_t d = 0; d < HD; ++d) y[head * HD + d] += score[j - first] / total * v[j][kv * HD + d];
      }
      const Vec o = linear(model, p + "self_attn.o_proj", y, c.o_bias);
      for (int64_t i = 0; i < C; ++i) h[t][i] += o[i];
    }
    for (int64_t t = 0; t < T; ++t) {
      const Vec x = norm(model, p + "post_attention_layernorm", h[t]);
      Vec up = linear(model, p + "mlp.up_proj", x, c.mlp_bias);
      if (c.activation == Activation::SwiGlu) {
        const Vec gate = linear(model, p + "mlp.gate_proj", x, c.mlp_bias);
        for (size_t i = 0; i < up.size(); ++i) up[i] *= gate[i] / (1 + std::exp(-gate[i]));
      } else {
        for (double& u : up)
          u = 0.5 * u * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (u + 0.044715 * u * u * u)));
      }
      const Vec down = linear(model, p + "mlp.down_proj", up, c.mlp_bias);
      for (int64_t i = 0; i < C; ++i) h[t][i] += down[i];
    }
  }
  std::vector<Vec> logits;
  const std::string head = c.tied_embeddings ? "model.embed_tokens" : "lm_head";
  for (int64_t t = 0; t < T; ++t) logits.push_back(linear(model, head, norm(model, "model.norm", h[t]), false));
  return logits;
}

// The Llama family's shapes of configuration, each on a tiny model.
std::map<std::string, DecoderConfig> variants() {
  const DecoderConfig tiny = DecoderConfig::preset("llama-tiny");
  DecoderConfig llama3 = tiny;  // GQA 4:2, untied, Llama 3.1's rope scaling
  llama3.rope.theta = 500000;
  llama3.rope.scaling = {"llama3", 8.0, 1.0, 4.0, 32};
  DecoderConfig qwen2 = tiny;  // biases on q, k and v only; tied embeddings
  qwen2.qkv_bias = true, qwen2.tied_embeddings = true, qwen2.rope.theta = 1e6;
  DecoderConfig mistral = tiny;  // a sliding window shorter than the sequence; multi-query
  mistral.sliding_window = 3, mistral.n_kv_head = 1;
  DecoderConfig odd = tiny;  // head_dim given apart from hidden/heads, partial rotary, linear scaling, all biases
  odd.head_dim = 8, odd.rope.rotary_dim = 4, odd.rope.scaling = {"linear", 2.0};
  odd.qkv_bias = odd.o_bias = odd.mlp_bias = true;
  DecoderConfig gpt2 = tiny;  // GPT-2's choices: LayerNorm, learned positions, GELU, tied, all biases
  gpt2.norm = Norm::LayerNorm, gpt2.norm_eps = 1e-5, gpt2.positions = Positions::Learned;
  gpt2.activation = Activation::GeluTanh, gpt2.tied_embeddings = true, gpt2.n_kv_head = 4;
  gpt2.qkv_bias = gpt2.o_bias = gpt2.mlp_bias = true;
  return {{"llama3", llama3}, {"qwen2", qwen2}, {"mistral", mistral}, {"odd", odd}, {"gpt2-like", gpt2}};
}

}  // namespace

TEST_CASE("the decoder computes the f64 reference forward for each of the Llama family's configurations",
          "[models]") {
  for (auto [name, config] : variants()) {
    for (auto kernel : {nn::AttentionKernel::Fused, nn::AttentionKernel::Gemm}) {
      INFO(name << (kernel == nn::AttentionKernel::Fused ? " fused" : " gemm"));
      config.attention = kernel;
      Decoder model(config, 11);
      // Biases and norm weights start at 0 and 1: move them so the reference sees their effect.
      Generator gen(3);
      for (auto& [pname, parameter] : model.named_parameters())
        if (parameter.dim() == 1) parameter.data().copy_(normal(parameter.sizes(), gen, 1.0, 0.1));
      const int64_t B = 2, T = 7;
      std::vector<int64_t> ids;
      for (int64_t i = 0; i < B * T; ++i) ids.push_back((i * 37 + 5) % config.vocab_size);
      const Tensor logits = model(Variable(Tensor::from_vector(ids, {B, T}))).data();
      REQUIRE(logits.sizes() == Shape{B, T, config.vocab_size});
      for (int64_t b = 0; b < B; ++b) {
        const std::vector<Vec> expected =
            reference_forward(model, std::vector<int64_t>(ids.begin() + b * T, ids.begin() + (b + 1) * T));
        Vec flat;
        for (const Vec& row : expected) flat.insert(flat.end(), row.begin(), row.end());
        const Vec actual = logits.narrow(0, b, 1).contiguous().to_vector<double>();
        CHECK(testing::mismatch(actual, flat, 2e-5, 1e-4) == "");
      }
    }
  }
}

TEST_CASE("decoder parameters: Hugging Face Llama's names, the count without building, ties, layers", "[models]") {
  for (auto [name, config] : variants()) {
    INFO(name);
    const Decoder model(config);
    CHECK(config.parameter_count() == model.parameter_count());
    int64_t listed = 0;
    for (const nn::LayerDescription& layer : config.layers()) listed += layer.parameters;
    CHECK(listed == model.parameter_count() + (config.tied_embeddings ? config.vocab_size * config.hidden_size : 0));
    CHECK(model.num_layers() == static_cast<size_t>(config.n_layer) + 2);
    CHECK(model.ties().size() == (config.tied_embeddings ? 1u : 0u));
    CHECK(model.layer_parameters(0).front() == "model.embed_tokens.weight");
    CHECK(model.layer_parameters(model.num_layers() - 1).back() ==
          (config.tied_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"));
  }
  const Decoder llama(DecoderConfig::preset("llama-tiny"));
  const auto names = llama.named_parameters();
  CHECK(names.front().first == "model.embed_tokens.weight");
  CHECK(names[1].first == "model.layers.0.input_layernorm.weight");
  CHECK(names[2].first == "model.layers.0.self_attn.q_proj.weight");
  CHECK(llama.parameter("model.layers.1.self_attn.k_proj.weight").sizes() == Shape{32, 64});  // 2 kv heads of 16
  CHECK(llama.parameter("model.layers.1.mlp.gate_proj.weight").sizes() == Shape{176, 64});
  CHECK(names.back().first == "lm_head.weight");
}

TEST_CASE("a partly built decoder (a pipeline stage) and a deferred one draw the whole model's weights", "[models]") {
  const DecoderConfig config = variants().at("llama3");
  const Decoder whole(config, 21);
  Decoder stage(config, 21, {false, false, true, true});  // the second layer and the head
  for (const auto& [name, parameter] : stage.named_parameters()) {
    INFO(name);
    CHECK(testing::mismatch(parameter.data(), whole.parameter(name).data(), 0, 0) == "");
  }
  CHECK_THROWS_WITH(stage.forward_layer(1, Variable(Tensor::zeros({1, 2, 64}))),
                    Catch::Contains("layer 1 is not built here"));
  // Under deferred init each parameter is released and records its fill (what ZeRO-3 asks for
  // one parameter at a time); each fill gives the whole model's values.
  std::unique_ptr<Decoder> deferred;
  {
    nn::DeferredInit scope;
    deferred = std::make_unique<Decoder>(config, 21);
  }
  for (const auto& [name, parameter] : deferred->named_parameters()) {
    INFO(name);
    CHECK(nn::is_deferred(parameter));
    CHECK(testing::mismatch(nn::initial_value(parameter, name), whole.parameter(name).data(), 0, 0) == "");
  }
}

TEST_CASE("decoder gradients agree with finite differences (f64, GQA, window, biases, RoPE)", "[models]") {
  DecoderConfig config = variants().at("mistral");
  config.n_layer = 1, config.hidden_size = 16, config.n_head = 2, config.n_kv_head = 1, config.intermediate_size = 24;
  config.vocab_size = 11, config.dtype = DType::F64, config.qkv_bias = true;
  config.attention = nn::AttentionKernel::Fused;
  Decoder model(config, 4);
  const Tensor ids = Tensor::from_vector<int64_t>({1, 4, 7, 2, 9, 3}, {1, 6});
  Generator gen(8);
  const Tensor weights = uniform({1, 6, 11}, gen, -1, 1, DType::F64);
  const auto loss = [&] {  // sum(logits * weights)
    autograd::NoGradGuard no_grad;
    const std::vector<double> y = model(Variable(ids)).data().to_vector<double>(), w = weights.to_vector<double>();
    double total = 0;
    for (size_t j = 0; j < y.size(); ++j) total += y[j] * w[j];
    return total;
  };
  autograd::backward({model(Variable(ids))}, {weights});
  for (const auto& [name, parameter] : model.named_parameters()) {
    INFO(name);
    const std::vector<double> grad = parameter.grad().to_vector<double>();
    double* values = parameter.data().data<double>();
    for (size_t j = 0; j < grad.size(); j += 1 + grad.size() / 5) {  // five elements of each
      const double saved = values[j], eps = 1e-6;
      values[j] = saved + eps;
      const double plus = loss();
      values[j] = saved - eps;
      const double minus = loss();
      values[j] = saved;
      CHECK(grad[j] == Approx((plus - minus) / (2 * eps)).margin(1e-7).epsilon(1e-5));
    }
  }
}

TEST_CASE("the decoder's forward continued over a KV cache gives the full forward's logits", "[models]") {
  for (auto [name, config] : variants()) {
    INFO(name);
    config.sliding_window = name == "mistral" ? 3 : 0;
    Decoder model(config, 5);
    autograd::NoGradGuard no_grad;
    const int64_t B = 2, T = 9;
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < B * T; ++i) ids.push_back((i * 29 + 3) % config.vocab_size);
    const Tensor all = Tensor::from_vector(ids, {B, T});
    const Tensor full = model(Variable(all)).data();
    // A prompt of 4, then one position at a time, then the last 2 together.
    KVCache cache = model.make_cache(B, 16);
    std::vector<Tensor> pieces{model.forward_cached(Variable(all.narrow(1, 0, 4).contiguous()), cache).data()};
    for (int64_t t = 4; t < 7; ++t)
      pieces.push_back(model.forward_cached(Variable(all.narrow(1, t, 1).contiguous()), cache).data());
    pieces.push_back(model.forward_cached(Variable(all.narrow(1, 7, 2).contiguous()), cache).data());
    CHECK(cache.position == T);
    CHECK(cache.layers[0].keys.size(1) == config.n_kv_head);  // grouped-query sized
    int64_t t = 0;
    for (const Tensor& piece : pieces) {
      CHECK(testing::mismatch(piece, full.narrow(1, t, piece.size(1)), 1e-5, 1e-4) == "");
      t += piece.size(1);
    }
    CHECK_THROWS_WITH(model.forward_cached(Variable(all), cache), Catch::Contains("overflow the cache at 9 of 16"));
  }
}

TEST_CASE("bad decoder configs are refused naming the field", "[models]") {
  DecoderConfig c = DecoderConfig::preset("llama-tiny");
  c.n_kv_head = 3;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("n_head (4) must be a multiple of n_kv_head (3)"));
  c = DecoderConfig::preset("llama-tiny");
  c.rope.scaling.type = "yarn";
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("rope_scaling type \"yarn\" is not supported"));
  c = DecoderConfig::preset("llama-tiny");
  c.rope.scaling = {"llama3", 8.0, 1.0, 4.0, 0};
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("needs original_max_position_embeddings > 0"));
  c = DecoderConfig::preset("llama-tiny");
  c.rope.rotary_dim = 5;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("must be even and at most the head size 16"));
  CHECK_THROWS_WITH(DecoderConfig::preset("llama-huge"), Catch::Contains("use llama-tiny, llama-small, llama-100M, llama-350M, gpt2-tiny, gpt2-small or gpt2-124M"));
  const Decoder model(DecoderConfig::preset("llama-tiny"));
  CHECK_THROWS_WITH(const_cast<Decoder&>(model)(Variable(Tensor::zeros({1, 129}, DType::I64))),
                    Catch::Contains("sequence length 129 exceeds max_position_embeddings 128"));
}

TEST_CASE("the decoder refuses dropout under sequence parallelism, and generation under it, by name", "[models]") {
  DecoderConfig config = DecoderConfig::preset("llama-tiny");
  const std::vector<bool> every(config.n_layer + 2, true);
  // One rank's local group: the tensor-parallel layers over a group of one.
  const auto group = std::make_shared<parallel::LocalCommunicator>();
  config.dropout = 0.1;
  CHECK_THROWS_WITH(Decoder(config, 1, every, std::make_shared<TensorParallelDecoderLayers>(group, true)),
                    Catch::Contains("dropout 0.1 with sequence parallelism is not supported"));
  config.dropout = 0;
  const Decoder split(config, 1, every, std::make_shared<TensorParallelDecoderLayers>(group, true));
  CHECK_THROWS_WITH(split.make_cache(1), Catch::Contains("generation with sequence parallelism is not supported"));
}
