#include "models/gpt.h"

#include <cmath>
#include <map>

#include "autograd/functions.h"
#include "nn/deferred_init.h"
#include "nn/init.h"

namespace fathom::models {

GPTConfig GPTConfig::preset(const std::string& name) {
  GPTConfig c;
  if (name == "tiny") {
    c.n_layer = 2, c.n_head = 2, c.n_embd = 64, c.vocab_size = 256, c.block_size = 64;
  } else if (name == "small") {
    c.n_layer = 4, c.n_head = 4, c.n_embd = 256, c.vocab_size = 512, c.block_size = 128;
  } else if (name == "gpt2-124M" || name == "gpt2") {
    c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.vocab_size = 50257, c.block_size = 1024;
  } else {
    FATHOM_FAIL("unknown GPT preset \"", name, "\"; use tiny, small or gpt2-124M");
  }
  return c;
}

void GPTConfig::validate() const {
  FATHOM_CHECK(n_layer > 0 && n_head > 0 && n_embd > 0 && vocab_size > 0 && block_size > 0,
               "GPT config: n_layer, n_head, n_embd, vocab_size and block_size must be positive");
  FATHOM_CHECK(n_embd % n_head == 0, "GPT config: n_embd (", n_embd, ") must be a multiple of n_head (", n_head, ")");
  FATHOM_CHECK(dropout >= 0 && dropout < 1, "GPT config: dropout must be in [0, 1), got ", dropout);
  // Bounds far above any trained GPT (GPT-3: 96 layers, 12288 wide), so that the arithmetic on
  // sizes (parameter_count, memory estimates) cannot overflow.
  const auto bounded = [](const char* name, int64_t value, int64_t limit) {
    FATHOM_CHECK(value <= limit, "GPT config: ", name, " ", value, " is above the limit of ", limit);
  };
  bounded("n_layer", n_layer, 10'000);
  bounded("n_embd", n_embd, 1 << 20);
  bounded("vocab_size", vocab_size, 1 << 24);
  bounded("block_size", block_size, 1 << 24);
}

int64_t GPTConfig::parameter_count() const {
  validate();
  const int64_t C = n_embd, with_bias = bias ? 1 : 0;
  const int64_t layer_norm = C + with_bias * C;
  const int64_t attention = (C * 3 * C + with_bias * 3 * C) + (C * C + with_bias * C);
  const int64_t mlp = (C * 4 * C + with_bias * 4 * C) + (4 * C * C + with_bias * C);
  const int64_t embeddings = vocab_size * C * (tied_embeddings ? 1 : 2) + block_size * C;
  return embeddings + n_layer * (2 * layer_norm + attention + mlp) + layer_norm;
}

std::vector<nn::LayerDescription> GPTConfig::layers() const {
  validate();
  const int64_t C = n_embd, with_bias = bias ? 1 : 0;
  const int64_t layer_norm = C + with_bias * C;
  const int64_t attention = (C * 3 * C + with_bias * 3 * C) + (C * C + with_bias * C);
  const int64_t mlp = (C * 4 * C + with_bias * 4 * C) + (4 * C * C + with_bias * C);
  std::vector<nn::LayerDescription> out{{"GPTEmbedding", vocab_size * C + block_size * C}};
  for (int64_t i = 0; i < n_layer; ++i) out.push_back({"TransformerBlock", 2 * layer_norm + attention + mlp});
  out.push_back({"GPTHead", layer_norm + vocab_size * C});  // the head's weight: the tied embedding, or its own
  return out;
}

namespace {

// The place of a block another pipeline stage builds: keeps the blocks' names and indices.
struct UnbuiltBlock final : nn::Module {
  std::string type_name() const override { return "GPT.unbuilt_block"; }
};

bool is_bias(const std::string& name) { return name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0; }
bool is_norm(const std::string& name) { return name.find(".ln_") != std::string::npos || name.rfind("ln_", 0) == 0; }
// Weights drawn from the seed's stream: everything but norms and biases.
bool is_drawn(const std::string& name) { return !is_norm(name) && !is_bias(name); }

std::vector<bool> every_layer(const GPTConfig& config) {
  config.validate();
  return std::vector<bool>(static_cast<size_t>(config.n_layer) + 2, true);
}

}  // namespace

GPT::GPT(const GPTConfig& config, uint64_t seed) : GPT(config, seed, every_layer(config)) {}

GPT::GPT(const GPTConfig& config, uint64_t seed, std::vector<bool> built) : config_(config), built_(std::move(built)) {
  config.validate();
  FATHOM_CHECK(built_.size() == num_layers(), "GPT: ", built_.size(), " build flags for ", num_layers(), " layers");
  const nn::TransformerConfig block{config.n_embd, config.n_head, config.dropout, config.bias, config.dtype,
                                    config.attention};
  const bool embeddings = built_.front(), head = built_.back();
  transformer = register_module("transformer", std::make_shared<Transformer>());
  Transformer& t = *transformer;
  if (embeddings || (head && config.tied_embeddings))
    t.wte = t.register_module("wte", std::make_shared<nn::Embedding>(config.vocab_size, config.n_embd, config.dtype));
  if (embeddings)
    t.wpe = t.register_module("wpe", std::make_shared<nn::Embedding>(config.block_size, config.n_embd, config.dtype));
  t.drop = t.register_module("drop", std::make_shared<nn::Dropout>(config.dropout));
  t.h = t.register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    if (built_[i + 1]) t.h->push_back(std::make_shared<nn::TransformerBlock>(block));
    else t.h->push_back(std::make_shared<UnbuiltBlock>());
  }
  if (head) {
    t.ln_f = t.register_module("ln_f", std::make_shared<nn::LayerNorm>(config.n_embd, 1e-5, config.bias, config.dtype));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(config.n_embd, config.vocab_size, false, config.dtype));
    if (config.tied_embeddings) lm_head->tie_weight(t.wte->weight);
  }
  init_weights(seed);
}

// The whole model's weights draw in order — wte, wpe, each block's weights, an untied head —
// one offset of the stream each, so weight k of block i takes offset 2 + i·(weights per block)
// + k whatever else is built.
void GPT::init_weights(uint64_t seed) {
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  const auto drawn_in = [](const nn::Module& block) {
    int64_t n = 0;
    for (const auto& [name, parameter] : block.named_parameters()) n += is_drawn(name) ? 1 : 0;
    return n;
  };
  int64_t per_block = -1;
  for (const std::shared_ptr<nn::Module>& block : transformer->h->modules())
    if (per_block < 0 && dynamic_cast<const UnbuiltBlock*>(block.get()) == nullptr) per_block = drawn_in(*block);
  if (per_block < 0)  // no block here: count one's weights (only an untied head's offset needs it)
    per_block = drawn_in(nn::TransformerBlock({config_.n_embd, config_.n_head, 0.0, config_.bias, config_.dtype}));
  const std::string blocks = "transformer.h.";
  std::map<int64_t, int64_t> drawn_so_far;  // per block
  // Under nn::DeferredInit the parameters were released as they were built: each records how to
  // fill itself instead, and ZeRO stage 3 fills one at a time, keeping its own shard.
  const bool deferred = nn::DeferredInit::active();
  const auto init = [deferred](const autograd::Variable& parameter, std::function<void(const autograd::Variable&)> fill) {
    if (!deferred) return fill(parameter);
    nn::defer_initial_value(parameter, [fill](const Tensor& out) { fill(autograd::Variable(out, false)); });
  };
  for (const auto& [name, parameter] : named_parameters()) {
    if (is_norm(name) || is_bias(name)) {
      const double value = is_norm(name) && !is_bias(name) ? 1.0 : 0.0;
      init(parameter, [value](const autograd::Variable& p) { nn::init::constant_(p, value); });
      continue;
    }
    uint64_t offset = 0;
    if (name == "transformer.wpe.weight") {
      offset = 1;
    } else if (name.rfind(blocks, 0) == 0) {
      const int64_t i = std::stoll(name.substr(blocks.size()));
      offset = static_cast<uint64_t>(2 + i * per_block + drawn_so_far[i]++);
    } else if (name == "lm_head.weight") {  // untied
      offset = static_cast<uint64_t>(2 + config_.n_layer * per_block);
    }  // transformer.wte.weight: 0
    const double std = name.find("c_proj.weight") != std::string::npos ? residual_std : 0.02;
    init(parameter, [seed, offset, std](const autograd::Variable& p) {
      Generator gen(seed, offset);
      nn::init::normal_(p, gen, 0.0, std);
    });
  }
}

Variable GPT::forward(const Variable& idx) { return forward_layers(idx); }

Variable GPT::forward_layer(size_t layer, const Variable& x) {
  FATHOM_CHECK(layer < num_layers(), "GPT: layer ", layer, " of ", num_layers(), " does not exist");
  FATHOM_CHECK(built_[layer], "GPT: layer ", layer, " is not built here (another pipeline stage builds it)");
  if (layer == 0) {  // token ids -> embeddings
    FATHOM_CHECK(x.dim() == 2 && (x.dtype() == DType::I64 || x.dtype() == DType::I32),
                 "GPT: expected token ids of shape (B, T) and dtype i64, got ", x.data().str());
    const int64_t T = x.size(1);
    FATHOM_CHECK(T <= config_.block_size, "GPT: sequence length ", T, " exceeds block_size ", config_.block_size);
    const Tensor positions = Tensor::arange(T, DType::I64, x.device());
    return (*transformer->drop)(autograd::add((*transformer->wte)(x), (*transformer->wpe)(Variable(positions))));
  }
  if (layer == num_layers() - 1) return (*lm_head)((*transformer->ln_f)(x));  // -> logits
  return (*transformer->h->modules()[layer - 1])(x);
}

std::vector<std::string> GPT::layer_parameters(size_t layer) const {
  FATHOM_CHECK(layer < num_layers(), "GPT: layer ", layer, " of ", num_layers(), " does not exist");
  std::vector<std::string> prefixes;
  if (layer == 0) prefixes = {"transformer.wte.", "transformer.wpe."};
  else if (layer == num_layers() - 1) prefixes = {"transformer.ln_f.", "lm_head."};
  else prefixes = {"transformer.h." + std::to_string(layer - 1) + "."};
  std::vector<std::string> names;
  for (const auto& [name, parameter] : named_parameters())
    for (const std::string& prefix : prefixes)
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
  if (layer == num_layers() - 1 && config_.tied_embeddings) names.push_back("transformer.wte.weight");  // the head's weight
  return names;
}

std::string GPT::layer_type(size_t layer) const {
  FATHOM_CHECK(layer < num_layers(), "GPT: layer ", layer, " of ", num_layers(), " does not exist");
  return layer == 0 ? "GPTEmbedding" : layer == num_layers() - 1 ? "GPTHead" : "TransformerBlock";
}

std::vector<nn::Tie> GPT::ties() const {
  if (!config_.tied_embeddings) return {};
  return {{"embedding", "transformer.wte.weight", {0, num_layers() - 1}}};
}

}  // namespace fathom::models
