#pragma once
// How the decoder (models/decoder.h) makes its projections, embedding and head: the one model
// either way, its layers plain (DecoderLayers, tensor-parallel size 1) or split over a
// tensor-parallel group (TensorParallelDecoderLayers, Megatron's layout):
//
//   column  q, k, v, gate, up: output features split — each rank whole heads of q and of the
//           grouped k and v (n_head and n_kv_head both divisible by tp), its slice of the MLP
//   row     o, down: input features split, the partial products summed over the group
//   embedding and head: vocabulary-parallel, padded to a multiple of 128 x tp; the head tied
//           to the embedding's rows or its own (untied), and the loss the vocabulary-parallel
//           cross-entropy, which never gathers the logits
//   norms   replicated
//
// Every split parameter carries its placement (nn/placement.h), so Decoder::load_full takes a
// whole model's weights, checkpoints load at any tensor-parallel size, and exports gather them.

#include <memory>
#include <optional>

#include "autograd/variable.h"
#include "nn/module.h"
#include "parallel/communicator.h"

namespace fathom::models {

using autograd::Variable;

class DecoderLayers {
 public:
  virtual ~DecoderLayers() = default;
  virtual int tensor_parallel_size() const { return 1; }
  virtual std::shared_ptr<nn::Module> column(int64_t in, int64_t out, bool bias, DType dtype) const;
  virtual std::shared_ptr<nn::Module> row(int64_t in, int64_t out, bool bias, DType dtype) const;
  virtual std::shared_ptr<nn::Module> embedding(int64_t vocab, int64_t dim, DType dtype) const;
  // The LM head: over `tied` (the embedding's weight) or a weight of its own when undefined.
  virtual std::shared_ptr<nn::Module> head(int64_t dim, int64_t vocab, DType dtype, const Variable& tied) const;
  // What the head's input goes through first (the tensor-parallel region's entry).
  virtual Variable head_input(const Variable& x) const { return x; }
  // The mean cross-entropy of the head's output against `targets`, the same on every rank.
  virtual Variable loss(const Variable& logits, const Tensor& targets, std::optional<double> normaliser) const;
};

class TensorParallelDecoderLayers : public DecoderLayers {
 public:
  explicit TensorParallelDecoderLayers(std::shared_ptr<parallel::Communicator> group);
  int tensor_parallel_size() const override;
  std::shared_ptr<nn::Module> column(int64_t in, int64_t out, bool bias, DType dtype) const override;
  std::shared_ptr<nn::Module> row(int64_t in, int64_t out, bool bias, DType dtype) const override;
  std::shared_ptr<nn::Module> embedding(int64_t vocab, int64_t dim, DType dtype) const override;
  std::shared_ptr<nn::Module> head(int64_t dim, int64_t vocab, DType dtype, const Variable& tied) const override;
  Variable head_input(const Variable& x) const override;
  Variable loss(const Variable& logits, const Tensor& targets, std::optional<double> normaliser) const override;

 private:
  std::shared_ptr<parallel::Communicator> group_;
  mutable int64_t vocab_ = 0;  // the real vocabulary, set by embedding() or head()
};

}  // namespace fathom::models
