#pragma once
// GPT with tensor parallelism (Megatron's layout), the same function as models::GPT: the token
// embedding vocabulary-parallel (its vocabulary padded to a multiple of 128 × tp,
// parallel/vocab_parallel_embedding.h), the blocks with their heads and MLP split
// (parallel/tensor_parallel_transformer.h), the position embedding and layer norms replicated,
// and the LM head tied to the token embedding, so each rank computes the logits of its own
// vocabulary range; the loss is the vocabulary-parallel cross-entropy, which never gathers them.
// Parameter names are GPT's (Hugging Face GPT-2's), each rank holding its shard.
//
//
//   TensorParallelGPT model(config, groups.tensor_ptr());
//   model.load_full(unsharded_gpt);                 // or keep the model's own initialisation
//   Variable loss = model.loss(idx, targets);       // = nn::cross_entropy(gpt.forward(idx), targets)

#include <memory>
#include <optional>

#include "models/gpt.h"
#include "nn/layer_sequence.h"
#include "parallel/communicator.h"
#include "parallel/tensor_parallel_transformer.h"
#include "parallel/vocab_parallel_embedding.h"

namespace fathom::models {

struct TensorParallelGPTOptions {
  // Megatron's sequence parallelism: after the embeddings every rank keeps its part of the
  // sequence (T must be divisible by tp) through the blocks (parallel/tensor_parallel_transformer.h)
  // and the final layer norm, which is all-gathered before the LM head.
  bool sequence_parallel = false;
};

// A list of layers like GPT (nn::LayerSequence: the embeddings, each block, the final norm and
// the head), so a pipeline can cut it into stages for 3D parallelism.
class TensorParallelGPT : public nn::Module, public nn::LayerSequence {
 public:
  // config.n_head must be divisible by the group's size; the embeddings must be tied.
  TensorParallelGPT(const GPTConfig& config, std::shared_ptr<parallel::Communicator> group,
                    TensorParallelGPTOptions options = {});
  // idx: (B, T) token ids, the same on every rank -> this rank's logits (B, T, padded vocab / tp);
  // columns past the real vocabulary are padding (zero rows of the table).
  Variable forward(const Variable& idx) override;
  // The mean cross-entropy of forward(idx) against targets (B, T), as nn::cross_entropy gives it
  // for GPT's logits: the same on every rank.
  Variable loss(const Variable& idx, const Tensor& targets, std::optional<double> normaliser = std::nullopt);
  // The same loss of logits forward() returned (what a training loop calls after engine(idx)).
  Variable loss_of_logits(const Variable& local_logits, const Tensor& targets,
                          std::optional<double> normaliser = std::nullopt) const;
  std::string type_name() const override { return "TensorParallelGPT"; }

  size_t num_layers() const override { return static_cast<size_t>(config_.n_layer) + 2; }
  Variable forward_layer(size_t layer, const Variable& input) override;
  std::vector<std::string> layer_parameters(size_t layer) const override;
  std::string layer_type(size_t layer) const override;
  // The vocabulary-parallel embedding is the head too: "embedding", used by the first and last layers.
  std::vector<nn::Tie> ties() const override;
  // Takes this rank's shards of an unsharded GPT with the same config.
  void load_full(const GPT& full);
  const GPTConfig& config() const { return config_; }
  const TensorParallelGPTOptions& options() const { return options_; }

  struct Transformer : nn::Module {
    std::shared_ptr<parallel::VocabParallelEmbedding> wte;
    std::shared_ptr<nn::Embedding> wpe;
    std::shared_ptr<nn::Dropout> drop;
    std::shared_ptr<nn::ModuleList> h;  // of parallel::TensorParallelBlock
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::string type_name() const override { return "TensorParallelGPT.transformer"; }
  };
  std::shared_ptr<Transformer> transformer;
  // The head: a linear over the token embedding's vocabulary shard (the same parameter, so its
  // name stays transformer.wte.weight); a module of its own so that whatever hooks modules
  // (ZeRO-3's gatherer, profilers) sees the head use the weight.
  std::shared_ptr<nn::Linear> lm_head;

 private:
  GPTConfig config_;
  std::shared_ptr<parallel::Communicator> group_;
  TensorParallelGPTOptions options_;
  Variable embed(const Variable& idx);
  Variable head(const Variable& x);
};

}  // namespace fathom::models
