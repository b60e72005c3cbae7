#pragma once
// The decoder every architecture is (models/decoder_config.h): token embeddings (plus learned
// positions when the config says so), n_layer pre-norm residual layers — attention with
// grouped-query heads, RoPE, optional biases and sliding window, then an MLP, GELU or gated SiLU
// — a final norm and the language-model head, tied to the embeddings or its own.
//
// Parameter names are Hugging Face Llama's (model.embed_tokens.weight,
// model.layers.0.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight), which Qwen2
// and Mistral share; an architecture that names them otherwise gets an adapter in the model
// registry, not another model. Like GPT, the model is an nn::LayerSequence — layer 0 the
// embeddings, layers 1..n_layer the decoder layers, the last the final norm and head — so a
// pipeline can cut it, activation checkpointing can recompute its layers, and nn::DeferredInit
// can build it shard by shard.
//
// Its projections, embedding and head come from a models::DecoderLayers (models/decoder_layers.h):
// plain layers, or split over a tensor-parallel group — tensor parallelism is a plan over this
// one model, not a second one. A tensor-parallel decoder takes a whole one's weights (load_full).

#include <memory>
#include <string>

#include "core/generator.h"
#include "models/decoder_config.h"
#include "models/decoder_layers.h"
#include "nn/containers.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"

namespace fathom::models {

using autograd::Variable;

// Generation's key/value cache: per layer, the keys and values of every position fed so far,
// (B, n_kv_head, max_positions, head_dim) in the weights' dtype on their device — grouped-query
// sized, never repeated per query head. Decoder::forward_cached appends to it.
struct KVCache {
  struct Layer {
    Tensor keys, values;
  };
  std::vector<Layer> layers;
  int64_t position = 0;  // positions filled
  int64_t batch() const { return layers.empty() ? 0 : layers.front().keys.size(0); }
  int64_t capacity() const { return layers.empty() ? 0 : layers.front().keys.size(2); }
  void reset() { position = 0; }
};

// What the attention layers of one forward share: the tokens' positions (T) or (B, T), the
// rotary frequencies for them, and the batch's padding-key mask (optional, (B, Tk) over every
// key, cached ones included).
struct AttentionContext {
  Tensor positions;
  Tensor inv_freq;  // rotary models only
  Tensor key_padding_mask;
  int64_t cached = 0;  // positions already in the cache before this forward
};

class DecoderAttention : public nn::Module {
 public:
  DecoderAttention(const DecoderConfig& config, const DecoderLayers& layers);
  // x (B, T, hidden) -> (B, T, hidden). With `cache`, the new keys and values are written at
  // positions [context.cached, context.cached + T) and the queries attend to all of them: the
  // same forward as training's, continued (no graph is recorded for the cache's copies).
  Variable forward(const Variable& x, const AttentionContext& context, KVCache::Layer* cache = nullptr);
  std::string type_name() const override { return "DecoderAttention"; }
  int64_t kv_heads() const { return kv_heads_; }  // this rank's (its cache's)

  std::shared_ptr<nn::Module> q_proj, k_proj, v_proj, o_proj;

 private:
  const DecoderConfig config_;
  Variable attend(const Variable& x, const AttentionContext& context, KVCache::Layer* cache);

  int64_t heads_, kv_heads_;  // this rank's
  int64_t kv_head_ = -1;      // with replicated key/value heads, the one this rank reads
};

class DecoderMLP : public nn::Module {
 public:
  DecoderMLP(const DecoderConfig& config, const DecoderLayers& layers);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "DecoderMLP"; }

  std::shared_ptr<nn::Module> gate_proj;  // gated SiLU only
  std::shared_ptr<nn::Module> up_proj, down_proj;
};

// x + attn(norm(x)), then + mlp(norm(that)).
class DecoderLayer : public nn::Module {
 public:
  DecoderLayer(const DecoderConfig& config, const DecoderLayers& layers);
  Variable forward(const Variable& x, const AttentionContext& context, KVCache::Layer* cache = nullptr);
  std::string type_name() const override { return "DecoderLayer"; }

  std::shared_ptr<nn::Module> input_layernorm, post_attention_layernorm;
  std::shared_ptr<DecoderAttention> self_attn;
  std::shared_ptr<DecoderMLP> mlp;
  std::shared_ptr<nn::Dropout> dropout;  // on each branch's output (GPT-2's resid_pdrop)
};

class Decoder : public nn::Module, public nn::LayerSequence {
 public:
  explicit Decoder(const DecoderConfig& config, uint64_t seed = kDefaultSeed);
  // Only the layers `built` marks (one flag per layer): a pipeline stage's; the others have no
  // parameters, and every built one has the value the whole model of this seed gives it.
  Decoder(const DecoderConfig& config, uint64_t seed, std::vector<bool> built);
  // With its layers from `layers` (tensor-parallel ones: then load_full the whole model's weights).
  Decoder(const DecoderConfig& config, uint64_t seed, std::vector<bool> built,
          std::shared_ptr<const DecoderLayers> layers);
  // ids (B, T) -> logits (B, T, vocab_size), positions 0..T-1.
  Variable forward(const Variable& ids) override;
  std::string type_name() const override { return "Decoder"; }
  // N(0, init_std) for embeddings and projections, zero biases, unit norm weights (transformers'
  // _init_weights for these models). Each weight takes its own draw of the seed's stream, in
  // the whole model's order, so a partly built model draws what the whole one does.
  void init_weights(uint64_t seed);
  const DecoderConfig& config() const { return config_; }
  // Takes this rank's part of each parameter of `whole`, a decoder of the same config with
  // plain layers (by each parameter's placement).
  void load_full(const Decoder& whole);
  // The mean cross-entropy of forward's logits against `targets`, the same on every rank (the
  // vocabulary-parallel one under tensor parallelism).
  Variable loss(const Variable& logits, const Tensor& targets, std::optional<double> normaliser = std::nullopt) const;
  Device device() const { return model->embed_tokens->device(); }
  bool built(size_t layer) const { return built_.at(layer); }

  // The context of a forward over positions [cached, cached + T) of every row, on `device`.
  AttentionContext context(int64_t T, Device device, int64_t cached = 0) const;

  // An empty cache for `batch` rows of up to `capacity` positions (0: max_positions), on the
  // weights' device and in their dtype: this rank's key/value heads under tensor parallelism
  // (each rank decodes its heads; the logits are gathered). Needs the whole model built and no
  // sequence parallelism.
  KVCache make_cache(int64_t batch, int64_t capacity = 0) const;
  // ids (B, n) at the cache's next n positions -> logits (B, n, vocab_size) (the whole
  // vocabulary on every rank, also under tensor parallelism), the cache advanced.
  // key_padding_mask: optional (B, cache.position + n), 0 on padding (left-padded prompts).
  // Throws when the cache would overflow. Call it under autograd::NoGradGuard.
  Variable forward_cached(const Variable& ids, KVCache& cache, const Tensor& key_padding_mask = {});

  size_t num_layers() const override { return static_cast<size_t>(config_.n_layer) + 2; }
  Variable forward_layer(size_t layer, const Variable& input) override;
  std::vector<std::string> layer_parameters(size_t layer) const override;
  std::string layer_type(size_t layer) const override;
  // With tied embeddings: "embedding", model.embed_tokens.weight, used by the first and last layers.
  std::vector<nn::Tie> ties() const override;

  // Named like Hugging Face's LlamaModel.
  struct Body : nn::Module {
    std::shared_ptr<nn::Module> embed_tokens;
    std::shared_ptr<nn::Embedding> embed_positions;  // learned positions only
    std::shared_ptr<nn::Dropout> dropout;
    std::shared_ptr<nn::ModuleList> layers;
    std::shared_ptr<nn::Module> norm;
    std::string type_name() const override { return "Decoder.model"; }
  };
  std::shared_ptr<Body> model;
  std::shared_ptr<nn::Module> lm_head;

 private:
  // Token (and learned position) embeddings of ids at positions [start, start + T).
  Variable embed(const Variable& ids, int64_t start);
  // The final norm and the language-model head: hidden states -> logits.
  Variable head(const Variable& x);

  DecoderConfig config_;
  std::vector<bool> built_;
  std::shared_ptr<const DecoderLayers> layers_;
};

}  // namespace fathom::models
