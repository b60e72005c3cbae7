#pragma once
// The model fathom-train trains, as its models::ModelSpec builds it (the one decoder, configured
// as GPT-2, Llama, Qwen2 or Mistral); with tensor parallelism (tensor_parallel.autotp_size > 1)
// the same decoder with its layers split over the tensor-parallel group
// (models/decoder_layers.h); with pipeline parallelism (pipeline.stages > 1) this rank builds its
// stage's layers (parallel::PipelineModule); and the loss of what the model returns (all logits,
// or this rank's vocabulary slice of them).
//
// The tensor-parallel model starts from the very weights the unsplit model of the same seed (or
// start file) has: every rank builds that model on the host once and keeps its shards, so one
// command trains the same model at every tensor-parallel size. (At start a rank holds the whole
// model for a moment.) A pipeline stage of the model from the seed builds only its own layers.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "models/decoder.h"
#include "models/model_spec.h"
#include "parallel/pipeline_module.h"
#include "parallel/topology.h"

namespace fathom::apps {

class TrainModel {
 public:
  // `init_path`: weights to start from, as ModelSpec::load reads them ("": the seed's
  // initialisation). `shard_by_shard`: build the model under nn::DeferredInit (ZeRO stage 3 makes
  // each parameter — from the seed, or read from `init_path` — when it shards it; without tensor
  // or pipeline parallelism).
  // `sequence_parallel`: Megatron's sequence parallelism for the tensor-parallel model;
  // `device`: where it will train, whose tensor-parallel communicator its layers use (NCCL on GPUs).
  TrainModel(const models::ModelSpec& spec, uint64_t seed, const std::string& init_path, bool shard_by_shard,
             const parallel::ProcessGroups& groups, bool sequence_parallel = false,
             Device device = kCPU, parallel::PipelineOptions pipeline = {});

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  // DeepSpeed's "activation_checkpointing" section, applied to the model from outside it: every
  // transformer block recomputes its activations in backward; with partition_activations a
  // tensor-parallel block keeps only this rank's slice of its input.
  void checkpoint_blocks(bool synchronize_boundary, bool partition_activations) const;
  // This rank's pipeline stage (null without pipeline parallelism).
  const std::shared_ptr<parallel::PipelineModule>& pipeline() const { return pipeline_; }
  // The mean cross-entropy of the module's output against `targets`, the same on every rank.
  autograd::Variable loss(const autograd::Variable& output, const Tensor& targets,
                          std::optional<double> normaliser = std::nullopt) const;
  const models::ModelSpec& spec() const { return spec_; }
  int64_t parameter_count() const { return parameter_count_; }  // the unsplit model's

 private:
  models::ModelSpec spec_;
  std::shared_ptr<models::Decoder> decoder_;  // split over the tensor group, or null
  std::shared_ptr<parallel::PipelineModule> pipeline_;          // null without pipeline parallelism
  std::shared_ptr<nn::Module> module_;
  nn::LayerSequence* layers_ = nullptr;  // the model's layers (this stage's, under a pipeline)
  std::shared_ptr<parallel::Communicator> tensor_group_;
  bool sequence_parallel_ = false;
  int64_t parameter_count_ = 0;
};

}  // namespace fathom::apps
