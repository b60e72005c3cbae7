#include "models/decoder.h"

#include <cmath>
#include <map>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "nn/attention_kernel.h"
#include "nn/deferred_init.h"
#include "nn/init.h"
#include "nn/normalization.h"
#include "nn/placement.h"

namespace fathom::models {
namespace {

// (B, T, heads * HD) -> (B, heads, T, HD), a view.
Variable split_heads(const Variable& x, int64_t heads, int64_t head_dim) {
  return autograd::transpose(autograd::reshape(x, {x.size(0), x.size(1), heads, head_dim}), 1, 2);
}

// The place of a layer another pipeline stage builds: keeps the layers' names and indices.
struct UnbuiltLayer final : nn::Module {
  std::string type_name() const override { return "Decoder.unbuilt_layer"; }
};

bool is_norm(const std::string& name) { return name.find("norm.") != std::string::npos; }
// Weights drawn from the seed's stream: everything but norms and biases.
bool is_drawn(const std::string& name) { return !is_norm(name) && !name.ends_with(".bias"); }

std::vector<bool> every_layer(const DecoderConfig& config) {
  config.validate();
  return std::vector<bool>(static_cast<size_t>(config.n_layer) + 2, true);
}

}  // namespace

DecoderAttention::DecoderAttention(const DecoderConfig& c, const DecoderLayers& layers) : config_(c) {
  const int64_t HD = c.resolved_head_dim(), tp = layers.tensor_parallel_size();
  // Fewer key/value heads than ranks: each rank keeps all of them (replicated) and reads the one
  // its query heads share.
  const bool replicate_kv = c.n_kv_head < tp && tp % c.n_kv_head == 0;
  FATHOM_CHECK(c.n_head % tp == 0 && (c.n_kv_head % tp == 0 || replicate_kv), "the ", c.architecture, " model's ",
               c.n_head, " query heads and ", c.n_kv_head, " key/value heads do not split over ", tp,
               " tensor-parallel ranks (tensor_parallel.autotp_size; each rank holds whole query heads, and the "
               "key/value heads split or are replicated); use a tensor-parallel size that divides ",
               c.n_head, " and is a multiple or a divisor of ", c.n_kv_head);
  heads_ = c.n_head / tp, kv_heads_ = replicate_kv ? 1 : c.n_kv_head / tp;
  if (replicate_kv) kv_head_ = layers.tensor_parallel_rank() / (tp / c.n_kv_head);
  q_proj = register_module("q_proj", layers.column(c.hidden_size, c.n_head * HD, c.qkv_bias, c.dtype));
  const auto kv = [&](int64_t out) {
    return replicate_kv ? layers.replicated(c.hidden_size, out, c.qkv_bias, c.dtype)
                        : layers.column(c.hidden_size, out, c.qkv_bias, c.dtype);
  };
  k_proj = register_module("k_proj", kv(c.n_kv_head * HD));
  v_proj = register_module("v_proj", kv(c.n_kv_head * HD));
  o_proj = register_module("o_proj", layers.row(c.n_head * HD, c.hidden_size, c.o_bias, c.dtype));
}

Variable DecoderAttention::forward(const Variable& x, const AttentionContext& context, KVCache::Layer* cache) {
  return with_hooks(x, [&](const Variable& input) { return attend(input, context, cache); });
}

Variable DecoderAttention::attend(const Variable& x, const AttentionContext& context, KVCache::Layer* cache) {
  // T: the whole sequence's length (under sequence parallelism x holds a part of it, the
  // projections gather the whole).
  const Variable queries = (*q_proj)(x);
  const int64_t B = queries.size(0), T = queries.size(1), HD = config_.resolved_head_dim();
  Variable q = split_heads(queries, heads_, HD);
  // Replicated key/value heads: this rank's one of all of them.
  const auto mine = [&](const Variable& all) {
    return kv_head_ < 0 ? all : autograd::narrow(all, 2, kv_head_ * HD, HD);
  };
  Variable k = split_heads(mine((*k_proj)(x)), kv_heads_, HD);
  Variable v = split_heads(mine((*v_proj)(x)), kv_heads_, HD);
  if (config_.positions == Positions::Rotary) {
    q = autograd::rotary_embedding(q, context.positions, context.inv_freq);
    k = autograd::rotary_embedding(k, context.positions, context.inv_freq);
  }
  if (cache) {  // append, then attend over every cached position (Tq = T <= Tk)
    const int64_t end = context.cached + T;
    cache->keys.narrow(2, context.cached, T).copy_(k.data());
    cache->values.narrow(2, context.cached, T).copy_(v.data());
    k = Variable(cache->keys.narrow(2, 0, end));
    v = Variable(cache->values.narrow(2, 0, end));
  }
  AttentionOptions options;
  options.window = config_.sliding_window;
  options.key_padding_mask = context.key_padding_mask;
  const Variable y = nn::scaled_dot_product_attention(q, k, v, options, config_.attention);
  return (*o_proj)(autograd::reshape(autograd::contiguous(autograd::transpose(y, 1, 2)), {B, T, heads_ * HD}));
}

DecoderMLP::DecoderMLP(const DecoderConfig& c, const DecoderLayers& layers) {
  const int64_t F = c.resolved_intermediate_size();
  if (c.activation == Activation::SwiGlu)
    gate_proj = register_module("gate_proj", layers.column(c.hidden_size, F, c.mlp_bias, c.dtype));
  up_proj = register_module("up_proj", layers.column(c.hidden_size, F, c.mlp_bias, c.dtype));
  down_proj = register_module("down_proj", layers.row(F, c.hidden_size, c.mlp_bias, c.dtype));
}

Variable DecoderMLP::forward(const Variable& x) {
  if (gate_proj) return (*down_proj)(autograd::swiglu((*gate_proj)(x), (*up_proj)(x)));
  return (*down_proj)(autograd::gelu((*up_proj)(x)));
}

DecoderLayer::DecoderLayer(const DecoderConfig& c, const DecoderLayers& layers) {
  input_layernorm = register_module("input_layernorm", layers.norm(c));
  self_attn = register_module("self_attn", std::make_shared<DecoderAttention>(c, layers));
  post_attention_layernorm = register_module("post_attention_layernorm", layers.norm(c));
  mlp = register_module("mlp", std::make_shared<DecoderMLP>(c, layers));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
}

Variable DecoderLayer::forward(const Variable& x, const AttentionContext& context, KVCache::Layer* cache) {
  return with_hooks(x, [&](const Variable& input) {
    const Variable h = autograd::add(input, (*dropout)(self_attn->forward((*input_layernorm)(input), context, cache)));
    return autograd::add(h, (*dropout)((*mlp)((*post_attention_layernorm)(h))));
  });
}

Decoder::Decoder(const DecoderConfig& config, uint64_t seed) : Decoder(config, seed, every_layer(config)) {}

Decoder::Decoder(const DecoderConfig& config, uint64_t seed, std::vector<bool> built)
    : Decoder(config, seed, std::move(built), std::make_shared<DecoderLayers>()) {}

Decoder::Decoder(const DecoderConfig& config, uint64_t seed, std::vector<bool> built,
                 std::shared_ptr<const DecoderLayers> layers)
    : config_(config), built_(std::move(built)), layers_(std::move(layers)) {
  config_.validate();
  FATHOM_CHECK(built_.size() == num_layers(), "Decoder: ", built_.size(), " build flags for ", num_layers(), " layers");
  // A dropout mask drawn per sequence part would not be the whole sequence's.
  FATHOM_CHECK(!layers_->sequence_parallel() || config_.dropout == 0, "the ", config_.architecture,
               " model's dropout ", config_.dropout, " with sequence parallelism is not supported; set dropout to 0 "
               "(as Llama, Qwen2 and Mistral train) or turn sequence parallelism off");
  const DecoderConfig& c = config_;
  const bool embeddings = built_.front(), head = built_.back();
  model = register_module("model", std::make_shared<Body>());
  Body& m = *model;
  if (embeddings || (head && c.tied_embeddings))
    m.embed_tokens = m.register_module("embed_tokens", layers_->embedding(c.vocab_size, c.hidden_size, c.dtype));
  if (embeddings && c.positions == Positions::Learned)
    m.embed_positions =
        m.register_module("embed_positions", std::make_shared<nn::Embedding>(c.max_positions, c.hidden_size, c.dtype));
  m.dropout = m.register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
  m.layers = m.register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    if (built_[i + 1]) m.layers->push_back(std::make_shared<DecoderLayer>(c, *layers_));
    else m.layers->push_back(std::make_shared<UnbuiltLayer>());
  }
  if (head) {
    m.norm = m.register_module("norm", layers_->norm(c));
    const Variable tied = c.tied_embeddings ? m.embed_tokens->parameter("weight") : Variable();
    lm_head = register_module("lm_head", layers_->head(c.hidden_size, c.vocab_size, c.dtype, tied));
  }
  init_weights(seed);
}

// Stream offsets in the whole model's order: embed_tokens 0, embed_positions 1, then each
// layer's drawn weights, then an untied head, whatever else is built.
void Decoder::init_weights(uint64_t seed) {
  // A layer's drawn weights: q, k, v, o, then the MLP's (gate,) up, down.
  const int64_t per_layer = 4 + (config_.activation == Activation::SwiGlu ? 3 : 2);
  const std::string layers = "model.layers.";
  std::map<int64_t, int64_t> drawn_so_far;  // per layer
  // Under nn::DeferredInit the parameters were released as they were built: each records how to
  // fill itself instead, and ZeRO stage 3 fills one at a time, keeping its own shard.
  const bool deferred = nn::DeferredInit::active();
  const auto init = [deferred](const Variable& parameter, std::function<void(const Variable&)> fill) {
    if (!deferred) return fill(parameter);
    nn::defer_initial_value(parameter, [fill](const Tensor& out) { fill(Variable(out, false)); });
  };
  for (const auto& [name, parameter] : named_parameters()) {
    if (!is_drawn(name)) {
      const double value = is_norm(name) && !name.ends_with(".bias") ? 1.0 : 0.0;
      init(parameter, [value](const Variable& p) { nn::init::constant_(p, value); });
      continue;
    }
    uint64_t offset = 0;  // model.embed_tokens.weight
    if (name == "model.embed_positions.weight") {
      offset = 1;
    } else if (name.rfind(layers, 0) == 0) {
      const int64_t i = std::stoll(name.substr(layers.size()));
      offset = static_cast<uint64_t>(2 + i * per_layer + drawn_so_far[i]++);
    } else if (name == "lm_head.weight") {
      offset = static_cast<uint64_t>(2 + config_.n_layer * per_layer);
    }
    const bool residual = name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight");
    const double std = config_.init_std / (residual && config_.scaled_residual_init
                                               ? std::sqrt(2.0 * static_cast<double>(config_.n_layer))
                                               : 1.0);
    init(parameter, [seed, offset, std](const Variable& p) {
      Generator gen(seed, offset);
      nn::init::normal_(p, gen, 0.0, std);
    });
  }
}

AttentionContext Decoder::context(int64_t T, Device device, int64_t cached) const {
  AttentionContext context;
  context.cached = cached;
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[t] = cached + t;
  context.positions = Tensor::from_vector(positions, {T}).to(device);
  if (config_.positions == Positions::Rotary)
    context.inv_freq =
        nn::rope_inv_freq(config_.rope, config_.resolved_head_dim(), config_.max_positions, cached + T).to(device);
  return context;
}

KVCache Decoder::make_cache(int64_t batch, int64_t capacity) const {
  // One new token cannot be split over the ranks' sequence parts.
  FATHOM_CHECK(!layers_->sequence_parallel(),
               "Decoder: generation with sequence parallelism is not supported; build the decoder without it");
  for (bool b : built_) FATHOM_CHECK(b, "Decoder: generation needs the whole model (this one is a pipeline stage)");
  capacity = capacity > 0 ? capacity : config_.max_positions;
  FATHOM_CHECK(batch > 0 && capacity <= config_.max_positions, "Decoder: a cache of ", batch, " rows and ", capacity,
               " positions (the model takes at most ", config_.max_positions, ")");
  const Tensor weight = model->embed_tokens->parameter("weight").data();
  KVCache cache;
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    const int64_t heads = static_cast<DecoderLayer&>((*model->layers)[i]).self_attn->kv_heads();
    const Shape shape{batch, heads, capacity, config_.resolved_head_dim()};  // this rank's heads
    cache.layers.push_back({Tensor::zeros(shape, weight.dtype(), weight.device()),
                            Tensor::zeros(shape, weight.dtype(), weight.device())});
  }
  return cache;
}

Variable Decoder::forward_cached(const Variable& ids, KVCache& cache, const Tensor& key_padding_mask) {
  FATHOM_CHECK(ids.dim() == 2 && ids.size(0) == cache.batch(), "Decoder: the cache holds ", cache.batch(),
               " rows but the ids are ", ids.data().str());
  const int64_t n = ids.size(1), start = cache.position;
  FATHOM_CHECK(start + n <= cache.capacity(), "Decoder: ", n, " more positions overflow the cache at ", start, " of ",
               cache.capacity(), "; reset it, or make a longer one");
  Variable h = embed(ids, start);
  AttentionContext context = this->context(n, ids.device(), start);
  context.key_padding_mask = key_padding_mask;
  for (int64_t i = 0; i < config_.n_layer; ++i)
    h = static_cast<DecoderLayer&>((*model->layers)[i]).forward(h, context, &cache.layers[i]);
  cache.position = start + n;
  return Variable(layers_->full_logits(head(h).data()));
}

Variable Decoder::embed(const Variable& ids, int64_t start) {
  const Variable tokens = (*model->embed_tokens)(ids);
  if (!model->embed_positions) return tokens;
  const Tensor positions = Tensor::arange(start + ids.size(1), DType::I64, ids.device()).narrow(0, start, ids.size(1));
  return autograd::add(tokens, (*model->embed_positions)(Variable(positions)));
}

Variable Decoder::head(const Variable& x) { return (*lm_head)(layers_->head_input((*model->norm)(x))); }

void Decoder::load_full(const Decoder& whole) {
  autograd::NoGradGuard no_grad;
  for (const auto& [name, parameter] : named_parameters())
    parameter.data().copy_(nn::shard_of(whole.parameter(name).data(), placement(name)));
}

Variable Decoder::loss(const Variable& logits, const Tensor& targets, std::optional<double> normaliser) const {
  return layers_->loss(logits, targets, normaliser);
}

Variable Decoder::forward(const Variable& ids) { return forward_layers(ids); }

Variable Decoder::forward_layer(size_t layer, const Variable& x) {
  FATHOM_CHECK(layer < num_layers(), "Decoder: layer ", layer, " of ", num_layers(), " does not exist");
  FATHOM_CHECK(built_[layer], "Decoder: layer ", layer, " is not built here (another pipeline stage builds it)");
  if (layer == 0) {  // token ids -> embeddings
    FATHOM_CHECK(x.dim() == 2 && (x.dtype() == DType::I64 || x.dtype() == DType::I32),
                 "Decoder: expected token ids of shape (B, T) and dtype i64, got ", x.data().str());
    const int64_t T = x.size(1);
    FATHOM_CHECK(T <= config_.max_positions, "Decoder: sequence length ", T, " exceeds max_position_embeddings ",
                 config_.max_positions);
    return layers_->enter((*model->dropout)(embed(x, 0)));
  }
  if (layer == num_layers() - 1) return head(x);
  auto& decoder_layer = static_cast<DecoderLayer&>((*model->layers)[layer - 1]);
  return decoder_layer.forward(x, context(layers_->sequence_length(x), x.device()));
}

std::vector<std::string> Decoder::layer_parameters(size_t layer) const {
  FATHOM_CHECK(layer < num_layers(), "Decoder: layer ", layer, " of ", num_layers(), " does not exist");
  std::vector<std::string> prefixes;
  if (layer == 0) prefixes = {"model.embed_tokens.", "model.embed_positions."};
  else if (layer == num_layers() - 1) prefixes = {"model.norm.", "lm_head."};
  else prefixes = {"model.layers." + std::to_string(layer - 1) + "."};
  std::vector<std::string> names;
  for (const auto& [name, parameter] : named_parameters())
    for (const std::string& prefix : prefixes)
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
  if (layer == num_layers() - 1 && config_.tied_embeddings) names.push_back("model.embed_tokens.weight");
  return names;
}

std::string Decoder::layer_type(size_t layer) const {
  FATHOM_CHECK(layer < num_layers(), "Decoder: layer ", layer, " of ", num_layers(), " does not exist");
  return layer == 0 ? "DecoderEmbedding" : layer == num_layers() - 1 ? "DecoderHead" : "DecoderLayer";
}

std::vector<nn::Tie> Decoder::ties() const {
  if (!config_.tied_embeddings) return {};
  return {{"embedding", "model.embed_tokens.weight", {0, num_layers() - 1}}};
}

}  // namespace fathom::models
