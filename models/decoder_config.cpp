#include "models/decoder_config.h"

namespace fathom::models {

DecoderConfig DecoderConfig::gpt2(int64_t n_layer, int64_t n_head, int64_t width, int64_t vocab_size,
                                  int64_t positions) {
  DecoderConfig c;
  c.architecture = "gpt2";
  c.n_layer = n_layer, c.hidden_size = width, c.n_head = c.n_kv_head = n_head, c.intermediate_size = 4 * width;
  c.vocab_size = vocab_size, c.max_positions = positions;
  c.norm = Norm::LayerNorm, c.norm_eps = 1e-5;
  c.positions = Positions::Learned;
  c.activation = Activation::GeluTanh;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.tied_embeddings = true;
  c.scaled_residual_init = true;
  return c;
}

DecoderConfig DecoderConfig::preset(const std::string& name) {
  if (name == "gpt2-tiny") return gpt2(2, 2, 64, 256, 64);
  if (name == "gpt2-small") return gpt2(4, 4, 256, 512, 128);
  if (name == "gpt2-124M") return gpt2(12, 12, 768, 50257, 1024);  // 124,439,808 parameters
  DecoderConfig c;
  if (name == "llama-tiny") {
    c.n_layer = 2, c.hidden_size = 64, c.n_head = 4, c.n_kv_head = 2, c.intermediate_size = 176;
    c.vocab_size = 256, c.max_positions = 128;
  } else if (name == "llama-small") {
    c.n_layer = 4, c.hidden_size = 256, c.n_head = 8, c.n_kv_head = 2, c.intermediate_size = 688;
    c.vocab_size = 512, c.max_positions = 256;
  } else if (name == "llama-100M") {  // the benchmarks' (123.8M parameters with Llama 2's vocabulary)
    c.n_layer = 12, c.hidden_size = 768, c.n_head = 12, c.n_kv_head = 4, c.intermediate_size = 2048;
    c.vocab_size = 32000, c.max_positions = 2048;
  } else if (name == "llama-350M") {  // 336M parameters
    c.n_layer = 24, c.hidden_size = 1024, c.n_head = 16, c.n_kv_head = 4, c.intermediate_size = 2816;
    c.vocab_size = 32000, c.max_positions = 2048;
  } else {
    FATHOM_FAIL("unknown decoder preset \"", name, "\"; use llama-tiny, llama-small, llama-100M, llama-350M, "
                "gpt2-tiny, gpt2-small or gpt2-124M");
  }
  return c;
}

void DecoderConfig::validate() const {
  const std::string where = "decoder config (" + architecture + ")";
  const auto positive = [&](const char* field, int64_t value) {
    FATHOM_CHECK(value > 0, where, ": ", field, " must be positive, got ", value);
  };
  positive("n_layer", n_layer);
  positive("hidden_size", hidden_size);
  positive("n_head", n_head);
  positive("n_kv_head", n_kv_head);
  positive("vocab_size", vocab_size);
  positive("max_positions", max_positions);
  FATHOM_CHECK(n_head % n_kv_head == 0, where, ": n_head (", n_head, ") must be a multiple of n_kv_head (", n_kv_head,
               "): each key/value head serves n_head / n_kv_head query heads");
  FATHOM_CHECK(head_dim > 0 || hidden_size % n_head == 0, where, ": hidden_size (", hidden_size,
               ") must be a multiple of n_head (", n_head, ") unless head_dim is given");
  FATHOM_CHECK(head_dim >= 0 && intermediate_size >= 0 && sliding_window >= 0, where,
               ": head_dim, intermediate_size and sliding_window must not be negative");
  FATHOM_CHECK(norm_eps > 0, where, ": the norm's eps must be positive, got ", norm_eps);
  FATHOM_CHECK(dropout >= 0 && dropout < 1, where, ": dropout must be in [0, 1), got ", dropout);
  FATHOM_CHECK(init_std > 0, where, ": init_std (initializer_range) must be positive, got ", init_std);
  if (positions == Positions::Rotary) rope.validate(resolved_head_dim(), where);
  // Far above any trained model, so size arithmetic cannot overflow.
  const auto bounded = [&](const char* field, int64_t value, int64_t limit) {
    FATHOM_CHECK(value <= limit, where, ": ", field, " ", value, " is above the limit of ", limit);
  };
  bounded("n_layer", n_layer, 10'000);
  bounded("hidden_size", hidden_size, 1 << 20);
  bounded("intermediate_size", intermediate_size, 1 << 22);
  bounded("vocab_size", vocab_size, 1 << 24);
  bounded("max_positions", max_positions, 1 << 24);
}

namespace {

struct Sizes {
  int64_t embedding, layer, head_norm, head;
};

Sizes sizes_of(const DecoderConfig& c) {
  c.validate();
  const int64_t C = c.hidden_size, HD = c.resolved_head_dim(), F = c.resolved_intermediate_size();
  const int64_t q = c.n_head * HD, kv = c.n_kv_head * HD;
  const int64_t norm = c.norm == Norm::LayerNorm && c.norm_bias ? 2 * C : C;
  const int64_t attention = C * (q + 2 * kv) + (c.qkv_bias ? q + 2 * kv : 0) + q * C + (c.o_bias ? C : 0);
  const int64_t mlp_in = c.activation == Activation::SwiGlu ? 2 : 1;
  const int64_t mlp = mlp_in * (C * F + (c.mlp_bias ? F : 0)) + F * C + (c.mlp_bias ? C : 0);
  const int64_t positions = c.positions == Positions::Learned ? c.max_positions * C : 0;
  return {c.vocab_size * C + positions, 2 * norm + attention + mlp, norm, c.vocab_size * C};
}

}  // namespace

int64_t DecoderConfig::parameter_count() const {
  const Sizes s = sizes_of(*this);
  return s.embedding + n_layer * s.layer + s.head_norm + (tied_embeddings ? 0 : s.head);
}

std::vector<nn::LayerDescription> DecoderConfig::layers() const {
  const Sizes s = sizes_of(*this);
  std::vector<nn::LayerDescription> out{{"DecoderEmbedding", s.embedding}};
  for (int64_t i = 0; i < n_layer; ++i) out.push_back({"DecoderLayer", s.layer});
  out.push_back({"DecoderHead", s.head_norm + s.head});
  return out;
}

}  // namespace fathom::models
