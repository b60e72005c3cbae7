#pragma once
// How the decoder (models/decoder.h) makes its projections, embedding and head: the one model
// either way, its layers plain (DecoderLayers, tensor-parallel size 1) or split over a
// tensor-parallel group (TensorParallelDecoderLayers, Megatron's layout):
//
//   column  q, k, v, gate, up: output features split — each rank whole heads of q and of the
//           grouped k and v (n_head and n_kv_head both divisible by tp), its slice of the MLP
//   replicated  k and v when there are fewer key/value heads than ranks (tp a multiple of
//           n_kv_head): every rank holds all of them and uses the one its query heads read, the
//           weights' gradients summed over the group (Megatron replicates such heads)
//   row     o, down: input features split, the partial products summed over the group
//   embedding and head: vocabulary-parallel, padded to a multiple of 128 x tp; the head tied
//           to the embedding's rows or its own (untied), and the loss the vocabulary-parallel
//           cross-entropy, which never gathers the logits
//   norms   replicated
//
// With sequence parallelism (Megatron's) the residual stream between the projections — the
// norms, residual adds and dropouts — holds this rank's part of the sequence, (B, T / tp, C):
// the embeddings are scattered, each column-parallel projection all-gathers its input and each
// row-parallel one reduce-scatters its output (the same bytes as the all-reduces they replace),
// the norms' gradients are summed over the group, and the final norm's output is gathered for
// the head. Attention and RoPE see the whole sequence (after the gather), positions 0..T-1.
//
// Every split parameter carries its placement (nn/placement.h), so Decoder::load_full takes a
// whole model's weights, checkpoints load at any tensor-parallel size, and exports gather them.

#include <memory>
#include <optional>

#include "autograd/variable.h"
#include "models/decoder_config.h"
#include "nn/module.h"
#include "parallel/communicator.h"

namespace fathom::models {

using autograd::Variable;

class DecoderLayers {
 public:
  virtual ~DecoderLayers() = default;
  virtual bool tensor_parallel() const { return false; }  // split layers, at any group size
  virtual int tensor_parallel_size() const { return 1; }
  virtual int tensor_parallel_rank() const { return 0; }
  virtual bool sequence_parallel() const { return false; }
  virtual std::shared_ptr<nn::Module> column(int64_t in, int64_t out, bool bias, DType dtype) const;
  virtual std::shared_ptr<nn::Module> row(int64_t in, int64_t out, bool bias, DType dtype) const;
  // Whole on every rank, inside the tensor-parallel region (plain: a column layer).
  virtual std::shared_ptr<nn::Module> replicated(int64_t in, int64_t out, bool bias, DType dtype) const {
    return column(in, out, bias, dtype);
  }
  virtual std::shared_ptr<nn::Module> embedding(int64_t vocab, int64_t dim, DType dtype) const;
  // The LM head: over `tied` (the embedding's weight) or a weight of its own when undefined.
  virtual std::shared_ptr<nn::Module> head(int64_t dim, int64_t vocab, DType dtype, const Variable& tied) const;
  virtual std::shared_ptr<nn::Module> norm(const DecoderConfig& config) const;
  // The embeddings' output as the residual stream holds it (this rank's part under sequence
  // parallelism), and the sequence length a layer's input stands for.
  virtual Variable enter(const Variable& embeddings) const { return embeddings; }
  virtual int64_t sequence_length(const Variable& x) const { return x.size(1); }
  // What the head's input goes through first (the tensor-parallel region's entry).
  virtual Variable head_input(const Variable& x) const { return x; }
  // The mean cross-entropy of the head's output against `targets`, the same on every rank.
  virtual Variable loss(const Variable& logits, const Tensor& targets, std::optional<double> normaliser) const;
  // The head's output over the whole vocabulary (generation samples from it), the same on every rank.
  virtual Tensor full_logits(const Tensor& logits) const { return logits; }
};

class TensorParallelDecoderLayers : public DecoderLayers {
 public:
  TensorParallelDecoderLayers(std::shared_ptr<parallel::Communicator> group, bool sequence_parallel = false);
  bool tensor_parallel() const override { return true; }
  int tensor_parallel_size() const override;
  int tensor_parallel_rank() const override;
  bool sequence_parallel() const override { return sequence_parallel_; }
  std::shared_ptr<nn::Module> column(int64_t in, int64_t out, bool bias, DType dtype) const override;
  std::shared_ptr<nn::Module> row(int64_t in, int64_t out, bool bias, DType dtype) const override;
  std::shared_ptr<nn::Module> replicated(int64_t in, int64_t out, bool bias, DType dtype) const override;
  std::shared_ptr<nn::Module> embedding(int64_t vocab, int64_t dim, DType dtype) const override;
  std::shared_ptr<nn::Module> head(int64_t dim, int64_t vocab, DType dtype, const Variable& tied) const override;
  std::shared_ptr<nn::Module> norm(const DecoderConfig& config) const override;
  Variable enter(const Variable& embeddings) const override;
  int64_t sequence_length(const Variable& x) const override;
  Variable head_input(const Variable& x) const override;
  Variable loss(const Variable& logits, const Tensor& targets, std::optional<double> normaliser) const override;
  Tensor full_logits(const Tensor& logits) const override;  // all-gathered, the padding dropped

 private:
  std::shared_ptr<parallel::Communicator> group_;
  bool sequence_parallel_;
  mutable int64_t vocab_ = 0;  // the real vocabulary, set by embedding() or head()
};

}  // namespace fathom::models
