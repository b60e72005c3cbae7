#pragma once
// GPT: token and position embeddings, a stack of pre-LayerNorm transformer blocks, a final
// LayerNorm and the language-model head (tied to the token embedding by default).
//
// Parameter names and shapes are Hugging Face GPT-2's (transformer.wte.weight,
// transformer.h.0.attn.c_attn.weight, ..., lm_head.weight) so weights move to and from the
// wider ecosystem (models/gpt_weights.h converts Conv1D's [in, out] layout). The model is a
// sequence of layers (nn::LayerSequence) — layer 0 the token and position embeddings, layers
// 1..n_layer the blocks, the last the final norm and head — and forward runs them in order, so
// pipeline parallelism can cut it into stages; the tied embedding is a declared tie.

#include <string>

#include "core/generator.h"
#include "nn/containers.h"
#include "nn/embedding.h"
#include "nn/layer_sequence.h"
#include "nn/transformer.h"

namespace fathom::models {

using autograd::Variable;

struct GPTConfig {
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  int64_t vocab_size = 50257;
  int64_t block_size = 1024;
  double dropout = 0.0;
  bool bias = true;
  bool tied_embeddings = true;
  DType dtype = DType::F32;
  nn::AttentionKernel attention = nn::AttentionKernel::Auto;  // nn/attention_kernel.h

  // "tiny", "small" or "gpt2-124M" (GPT-2 small: 124,439,808 parameters with the tied head).
  static GPTConfig preset(const std::string& name);
  void validate() const;
  // The parameters a GPT of this config has (weights and biases of every layer), without
  // building it; GPT::parameter_count() of the built model agrees (tested).
  int64_t parameter_count() const;
  // Each layer's type and parameter count (the head counting the tied embedding again, as
  // GPT::layer_parameters lists it), without building it: what a pipeline partitions by.
  std::vector<nn::LayerDescription> layers() const;
};

class GPT : public nn::Module, public nn::LayerSequence {
 public:
  explicit GPT(const GPTConfig& config, uint64_t seed = kDefaultSeed);
  // Only the layers `built` marks (one flag per layer of num_layers()): a pipeline stage's. The
  // others have no parameters (a block's place holds an empty module, so names keep their
  // indices; the token embedding is built for the head too when they are tied), and every built
  // parameter has the value the whole model of this seed gives it.
  GPT(const GPTConfig& config, uint64_t seed, std::vector<bool> built);
  // idx: (B, T) token ids, T <= block_size -> logits (B, T, vocab_size)
  Variable forward(const Variable& idx) override;
  std::string type_name() const override { return "GPT"; }
  // GPT-2's initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm weights, and the
  // residual projections (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2 n_layer). Each weight
  // takes its own draw of the seed's stream, in the whole model's order, so a partly built model
  // draws exactly what the whole one does.
  void init_weights(uint64_t seed);
  bool built(size_t layer) const { return built_.at(layer); }
  const GPTConfig& config() const { return config_; }

  // The layers: n_layer + 2 (embeddings, blocks, final norm + head).
  size_t num_layers() const override { return static_cast<size_t>(config_.n_layer) + 2; }
  Variable forward_layer(size_t layer, const Variable& input) override;
  std::vector<std::string> layer_parameters(size_t layer) const override;
  // "GPTEmbedding", "TransformerBlock" (each block), "GPTHead".
  std::string layer_type(size_t layer) const override;
  // With tied_embeddings: "embedding", transformer.wte.weight, used by the first and last layers.
  std::vector<nn::Tie> ties() const override;

  // Named like Hugging Face: "transformer" holds wte, wpe, drop, h, ln_f.
  struct Transformer : nn::Module {
    std::shared_ptr<nn::Embedding> wte, wpe;
    std::shared_ptr<nn::Dropout> drop;
    std::shared_ptr<nn::ModuleList> h;
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::string type_name() const override { return "GPT.transformer"; }
  };
  std::shared_ptr<Transformer> transformer;
  std::shared_ptr<nn::Linear> lm_head;

 private:
  GPTConfig config_;
  std::vector<bool> built_;
};

}  // namespace fathom::models
