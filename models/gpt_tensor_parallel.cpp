#include "models/gpt_tensor_parallel.h"

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "parallel/sequence_parallel_norm.h"
#include "parallel/tensor_parallel_regions.h"
#include "parallel/vocab_parallel_cross_entropy.h"

namespace fathom::models {

TensorParallelGPT::TensorParallelGPT(const GPTConfig& config, std::shared_ptr<parallel::Communicator> group,
                                     TensorParallelGPTOptions options)
    : config_(config), group_(std::move(group)), options_(options) {
  const bool sequence_parallel = options.sequence_parallel;
  config.validate();
  FATHOM_CHECK(group_ != nullptr, "TensorParallelGPT: no tensor-parallel group");
  FATHOM_CHECK(config.tied_embeddings,
               "TensorParallelGPT: only tied embeddings are supported so far (the LM head is "
               "the vocabulary-parallel token embedding); set tied_embeddings");
  const nn::TransformerConfig block{config.n_embd, config.n_head, config.dropout,
                                    config.bias,   config.dtype,  config.attention};
  transformer = register_module("transformer", std::make_shared<Transformer>());
  Transformer& t = *transformer;
  t.wte = t.register_module("wte", std::make_shared<parallel::VocabParallelEmbedding>(config.vocab_size, config.n_embd,
                                                                                      group_, config.dtype));
  t.wpe = t.register_module("wpe", std::make_shared<nn::Embedding>(config.block_size, config.n_embd, config.dtype));
  t.drop = t.register_module("drop", std::make_shared<nn::Dropout>(config.dropout));
  t.h = t.register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < config.n_layer; ++i)
    t.h->push_back(std::make_shared<parallel::TensorParallelBlock>(block, group_, sequence_parallel));
  if (sequence_parallel)
    t.ln_f = t.register_module("ln_f", std::make_shared<parallel::SequenceParallelLayerNorm>(
                                           config.n_embd, group_, 1e-5, config.bias, config.dtype));
  else
    t.ln_f = t.register_module("ln_f", std::make_shared<nn::LayerNorm>(config.n_embd, 1e-5, config.bias, config.dtype));
  lm_head = register_module("lm_head", std::make_shared<nn::Linear>(t.wte->weight));
}

void TensorParallelGPT::load_full(const GPT& full) {
  const GPTConfig& c = full.config();
  FATHOM_CHECK(c.n_layer == config_.n_layer && c.n_embd == config_.n_embd && c.n_head == config_.n_head &&
                   c.vocab_size == config_.vocab_size && c.block_size == config_.block_size,
               "TensorParallelGPT.load_full: the GPT's config differs from this model's");
  transformer->wte->load_full(full.transformer->wte->weight.data());
  autograd::NoGradGuard no_grad;
  transformer->wpe->weight.data().copy_(full.transformer->wpe->weight.data());
  transformer->ln_f->weight.data().copy_(full.transformer->ln_f->weight.data());
  if (config_.bias) transformer->ln_f->bias.data().copy_(full.transformer->ln_f->bias.data());
  for (int64_t i = 0; i < config_.n_layer; ++i)
    std::static_pointer_cast<parallel::TensorParallelBlock>(transformer->h->modules()[i])
        ->load_full(*std::static_pointer_cast<nn::TransformerBlock>(full.transformer->h->modules()[i]));
}

Variable TensorParallelGPT::forward(const Variable& idx) { return forward_layers(idx); }

Variable TensorParallelGPT::forward_layer(size_t layer, const Variable& x) {
  FATHOM_CHECK(layer < num_layers(), "TensorParallelGPT: layer ", layer, " of ", num_layers(), " does not exist");
  if (layer == 0) return embed(x);
  if (layer == num_layers() - 1) return head(x);
  return (*transformer->h->modules()[layer - 1])(x);
}

Variable TensorParallelGPT::embed(const Variable& idx) {
  FATHOM_CHECK(idx.dim() == 2 && idx.dtype() == DType::I64,
               "TensorParallelGPT: expected token ids of shape (B, T) "
               "and dtype i64, got ",
               idx.data().str());
  const int64_t T = idx.size(1);
  FATHOM_CHECK(T <= config_.block_size, "TensorParallelGPT: sequence length ", T, " exceeds block_size ",
               config_.block_size);
  const int tp = group_->size();
  const bool sequence_parallel = options_.sequence_parallel;
  FATHOM_CHECK(!sequence_parallel || T % tp == 0, "TensorParallelGPT: with sequence parallelism the sequence length ",
               T, " must be divisible by the tensor-parallel size ", tp, "; use sequences of a multiple of ", tp,
               " tokens");
  Transformer& t = *transformer;
  const Tensor positions = Tensor::arange(T, DType::I64, idx.device());
  Variable x = autograd::add((*t.wte)(idx), (*t.wpe)(Variable(positions)));
  if (!sequence_parallel) return (*t.drop)(x);
  // From here on this rank's positions [rank T / tp, (rank + 1) T / tp).
  x = parallel::scatter_to_sequence_region(x, group_);
  return t.drop->forward_sequence_shard(x, group_->rank() * (T / tp), T);
}

// The tied head on this rank's vocabulary rows; the hidden state is replicated (all-gathered
// under sequence parallelism), so its gradient is summed over the ranks' vocabulary ranges (the
// gather's backward reduce-scatter sums it too).
Variable TensorParallelGPT::head(const Variable& x) {
  Transformer& t = *transformer;
  const bool sequence_parallel = options_.sequence_parallel;
  const int64_t T = x.size(1) * (sequence_parallel ? group_->size() : 1);
  const Variable normed = (*t.ln_f)(x);
  const Variable hidden = sequence_parallel ? parallel::gather_from_sequence_region(normed, group_, T)
                                            : parallel::copy_to_tensor_region(normed, group_);
  return (*lm_head)(hidden);  // (B, T, this rank's vocabulary rows)
}

std::vector<std::string> TensorParallelGPT::layer_parameters(size_t layer) const {
  FATHOM_CHECK(layer < num_layers(), "TensorParallelGPT: layer ", layer, " of ", num_layers(), " does not exist");
  std::vector<std::string> prefixes;
  if (layer == 0) prefixes = {"transformer.wte.", "transformer.wpe."};
  else if (layer == num_layers() - 1) prefixes = {"transformer.ln_f."};
  else prefixes = {"transformer.h." + std::to_string(layer - 1) + "."};
  std::vector<std::string> names;
  for (const auto& [name, parameter] : named_parameters())
    for (const std::string& prefix : prefixes)
      if (name.rfind(prefix, 0) == 0) names.push_back(name);
  if (layer == num_layers() - 1) names.push_back("transformer.wte.weight");  // the head's weight
  return names;
}

std::string TensorParallelGPT::layer_type(size_t layer) const {
  FATHOM_CHECK(layer < num_layers(), "TensorParallelGPT: layer ", layer, " of ", num_layers(), " does not exist");
  return layer == 0 ? "GPTEmbedding" : layer == num_layers() - 1 ? "GPTHead" : "TransformerBlock";
}

std::vector<nn::Tie> TensorParallelGPT::ties() const {
  return {{"embedding", "transformer.wte.weight", {0, num_layers() - 1}}};
}

Variable TensorParallelGPT::loss(const Variable& idx, const Tensor& targets, std::optional<double> normaliser) {
  return loss_of_logits(forward(idx), targets, normaliser);
}

Variable TensorParallelGPT::loss_of_logits(const Variable& local_logits, const Tensor& targets,
                                           std::optional<double> normaliser) const {
  const parallel::VocabParallelEmbedding& wte = *transformer->wte;
  return parallel::vocab_parallel_cross_entropy(local_logits, targets, {wte.local.offset, wte.local_real_rows}, group_,
                                                normaliser);
}

}  // namespace fathom::models
