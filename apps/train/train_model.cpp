#include "apps/train/train_model.h"

#include "nn/deferred_init.h"
#include "nn/loss.h"
#include "parallel/partitioned_checkpoint.h"

namespace fathom::apps {

TrainModel::TrainModel(const models::ModelSpec& spec, uint64_t seed, const std::string& init_path,
                       bool shard_by_shard, const parallel::ProcessGroups& groups, bool sequence_parallel, Device device,
                       parallel::PipelineOptions pipeline)
    : spec_(spec), sequence_parallel_(sequence_parallel) {
  parameter_count_ = spec.parameter_count();
  if (groups.pipeline().size() > 1 && groups.tensor().size() == 1 && init_path.empty()) {
    // Each stage builds only its own layers.
    pipeline_ = std::make_shared<parallel::PipelineModule>(
        spec.layers(),
        [&](const std::vector<bool>& built) {
          auto stage = spec.build(seed, built);
          layers_ = &models::layer_sequence(*stage);
          return stage;
        },
        groups, pipeline);
    module_ = pipeline_;
    return;
  }
  if (shard_by_shard) {
    FATHOM_CHECK(groups.tensor().size() == 1 && groups.pipeline().size() == 1,
                 "TrainModel: shard by shard builds the model without tensor or pipeline parallelism");
    nn::DeferredInit deferred;
    module_ = spec.build(seed);
    if (!init_path.empty()) spec.load(*module_, init_path);  // read when each parameter is sharded
    layers_ = &models::layer_sequence(*module_);
    return;
  }
  module_ = spec.build(seed);
  if (!init_path.empty()) spec.load(*module_, init_path);
  layers_ = &models::layer_sequence(*module_);
  if (groups.tensor().size() > 1) {
    // The same decoder with its layers split over the group, from the whole one's weights.
    tensor_group_ = groups.for_device(parallel::Axis::Tensor, device);
    decoder_ = std::make_shared<models::Decoder>(
        spec.decoder, seed, std::vector<bool>(spec.layers().size(), true),
        std::make_shared<models::TensorParallelDecoderLayers>(tensor_group_, sequence_parallel));
    decoder_->load_full(static_cast<const models::Decoder&>(*module_));
    module_ = decoder_;
    layers_ = decoder_.get();
  }
  if (groups.pipeline().size() > 1) {  // the model, or its tensor-parallel form (3D), cut into stages
    pipeline_ = std::make_shared<parallel::PipelineModule>(module_, groups, pipeline);
    module_ = pipeline_;
  }
}

void TrainModel::checkpoint_blocks(bool synchronize_boundary, bool partition_activations) const {
  nn::CheckpointPolicy policy = nn::checkpoint_layers_of_type(*layers_, spec_.block_type(), synchronize_boundary);
  if (partition_activations && tensor_group_ && !sequence_parallel_)
    policy = parallel::partition_checkpoint_inputs(std::move(policy), tensor_group_);
  layers_->set_checkpointing(std::move(policy));
}

autograd::Variable TrainModel::loss(const autograd::Variable& output, const Tensor& targets,
                                    std::optional<double> normaliser) const {
  if (decoder_) return decoder_->loss(output, targets, normaliser);
  return nn::cross_entropy(output, targets, normaliser);
}

}  // namespace fathom::apps
