#pragma once
// A model by architecture name, with what every program needs from it whatever the architecture:
// gpt2, llama, qwen2 or mistral, each a configuration of the one decoder (models::Decoder).
// A program holds a ModelSpec, never a model class: it builds the model (whole, one pipeline
// stage's layers, or under deferred init), lists its layers for a pipeline's cuts, counts its
// parameters for the memory check, loads a Hugging Face folder or file into it, and writes the
// folder back (config.json and safetensors that transformers' from_pretrained loads).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/decoder_config.h"
#include "nn/module.h"

namespace fathom::models {

struct ModelSpec {
  DecoderConfig decoder = DecoderConfig::preset("gpt2-small");

  // gpt2, llama, qwen2 or mistral: the decoder's, as its config.json's model_type names it.
  const std::string& architecture() const { return decoder.architecture; }

  // The architectures a spec can name.
  static const std::vector<std::string>& architectures();
  // `architecture`'s preset: gpt2 tiny|small|gpt2-124M (DecoderConfig's gpt2-* shapes);
  // llama|qwen2|mistral tiny|small|100M|350M (its llama-* shapes with the architecture's
  // defaults: qwen2's q/k/v biases, mistral's window). Throws naming the choices.
  static ModelSpec preset(const std::string& architecture, const std::string& name);
  // A Hugging Face model folder's config.json (model_type picks the architecture).
  static ModelSpec from_folder(const std::string& folder);

  void validate() const;
  int64_t parameter_count() const;
  int64_t vocab_size() const;
  void set_vocab_size(int64_t vocab_size);
  int64_t max_positions() const;  // the longest sequence the model takes
  int64_t hidden_size() const;
  void set_attention(nn::AttentionKernel kernel);
  std::vector<nn::LayerDescription> layers() const;
  // The layer type activation checkpointing recomputes (a transformer block).
  std::string block_type() const;
  // "llama: 2 layers, 4 heads (2 kv), 64 wide, vocab 256, 128 positions" (the vocabulary left
  // out when a run's data decides it).
  std::string describe(bool with_vocab = true) const;

  // The model; `built` (one flag per layer) builds only a pipeline stage's layers.
  std::shared_ptr<nn::Module> build(uint64_t seed, std::optional<std::vector<bool>> built = std::nullopt) const;
  // Fills `model` (built from this spec) from `path`: a Hugging Face folder, or for gpt2 also a
  // GPT-2-layout .safetensors file. Under nn::DeferredInit each parameter records a read instead.
  void load(nn::Module& model, const std::string& path) const;
  // Writes `weights` (the model's names) as a Hugging Face folder: config.json and safetensors.
  // Returns the weights file (or the shard index) written.
  std::string save(const nn::NamedTensors& weights, const std::string& folder) const;

  // The spec as JSON (its Hugging Face config.json) and back, for checkpoints' client state.
  std::string to_json() const;
  static ModelSpec from_json(const std::string& json, const std::string& source);
};

// The nn::LayerSequence of a model ModelSpec::build made.
nn::LayerSequence& layer_sequence(nn::Module& model);

}  // namespace fathom::models
