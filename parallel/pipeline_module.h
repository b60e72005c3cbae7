#pragma once
// PipelineModule: this rank's stage of a model cut into pipeline stages (DeepSpeed's
// PipelineModule), an nn::Module the engine trains like any other.
//
//   auto gpt = std::make_shared<models::Decoder>(config, seed);      // an nn::LayerSequence
//   auto stage = std::make_shared<parallel::PipelineModule>(gpt, groups, PipelineOptions{"parameters"});
//   auto [engine, ...] = fathom::initialize(ds_config, stage, nullptr, data, groups);
//   engine->train_batch(next_batch);                                 // a whole pipelined step
//
// The model's layers are cut into stages × chunks pieces (pipeline_partition.h); virtual stage
// c·stages + s is chunk c of stage s (one chunk per stage except under the interleaved
// schedule). The module holds the modules of its own pieces under their names in the whole
// model ("transformer.h.5.attn..."), so parameter names, dropout streams, checkpoints and exports
// do not depend on the pipeline degree. Either the stage is built alone (from a description of the
// layers and a builder) or the other layers' parameters are released after the whole model is
// built; either way each stage starts from the initialisation one process has.
// A parameter that layers on several stages use (a declared nn::Tie: a tied embedding and head)
// has a copy on each of those stages; its placement names the tie, the copy on the first stage
// is the leader, and ties() gives the group that sums the copies' gradients before each step.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer_sequence.h"
#include "nn/module.h"
#include "parallel/topology.h"

namespace fathom::parallel {

struct PipelineOptions {
  // DeepSpeed's partition_method: "parameters", "uniform" or "type:REGEX".
  std::string partition = "parameters";
  // Model chunks per stage: the interleaved schedule's virtual_stages.
  int chunks = 1;
  // DeepSpeed's activation_checkpoint_interval: the chunk's layers run in groups of this many,
  // each group's activations recomputed in backward (autograd::checkpoint); 0: off. Layers
  // before the first floating-point activation (an embedding of token ids) run plainly.
  int activation_checkpoint_interval = 0;
};

class PipelineModule : public nn::Module {
 public:
  // A stage of a model that is built: `model` must also be an nn::LayerSequence, and the other
  // stages' parameters are released. Collective over the pipeline group (the ties' groups are
  // split from it).
  PipelineModule(std::shared_ptr<nn::Module> model, const ProcessGroups& groups, PipelineOptions options = {});
  // A stage built alone (DeepSpeed's LayerSpec): the model is described by its layers' types and
  // parameter counts (DecoderConfig::layers()), the cut made from that, and `build(built)` makes the
  // model with only the layers `built` marks, initialised as the whole model would be:
  //   PipelineModule(config.layers(), [&](auto& built) { return make_shared<Decoder>(config, seed, built); }, groups)
  using LayerBuilder = std::function<std::shared_ptr<nn::Module>(const std::vector<bool>& built)>;
  PipelineModule(const std::vector<nn::LayerDescription>& layers, const LayerBuilder& build, const ProcessGroups& groups,
                 PipelineOptions options = {});

  // The current chunk's layers on `input` (set_chunk chooses; the executor sets it per op).
  autograd::Variable forward(const autograd::Variable& input) override;
  std::string type_name() const override { return "PipelineModule"; }
  void set_chunk(int chunk);
  int chunk() const { return chunk_; }

  int stage() const { return stage_; }
  int num_stages() const { return stages_; }
  int chunks() const { return chunks_; }
  int virtual_stage(int chunk) const { return chunk * stages_ + stage_; }
  int num_virtual_stages() const { return stages_ * chunks_; }
  // Virtual stage v runs layers [boundaries()[v], boundaries()[v + 1]).
  const std::vector<size_t>& boundaries() const { return boundaries_; }
  // One line per stage: its layers, their types and parameter counts (printed at start).
  std::string describe() const;

  struct TiedCopies {
    std::string name;                  // the nn::Tie's name
    size_t parameter = 0;              // its index in this module's named_parameters
    std::shared_ptr<Communicator> group;  // the ranks holding a copy (this rank among them)
  };
  // The ties this rank holds a copy of whose layers live on more than one stage.
  const std::vector<TiedCopies>& ties() const { return ties_; }
  const ProcessGroups& groups() const { return groups_; }

 private:
  void assemble(const std::vector<nn::LayerDescription>& layers, const LayerBuilder& build, const PipelineOptions& options);
  void place_parameters(const std::vector<nn::Tie>& ties, const std::vector<int>& layer_stage);

  std::shared_ptr<nn::Module> model_;
  nn::LayerSequence* layers_ = nullptr;
  ProcessGroups groups_;
  int stage_ = 0, stages_ = 1, chunks_ = 1, chunk_ = 0, checkpoint_interval_ = 0;
  std::vector<size_t> boundaries_;
  std::vector<int64_t> layer_parameters_;
  std::vector<TiedCopies> ties_;
};

}  // namespace fathom::parallel
