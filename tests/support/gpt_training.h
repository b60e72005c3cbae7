#pragma once
// Shared by the equivalence tests: a tiny GPT-2 (the decoder in GPT-2's configuration) with
// dropout trained for a few steps, alone or
// data-parallel, and the comparison of two such runs (docs/architecture.md, "Equivalence": every step's
// |dloss|/|loss| and, at the end, every tensor's |dw|/|w| below a bound).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/initialize.h"
#include "models/decoder.h"
#include "parallel/communicator.h"
#include "parallel/topology.h"

namespace fathom::testing {

struct TrainingRun {
  std::vector<double> losses;
  std::vector<std::pair<std::string, Tensor>> weights;  // f64 copies of the final parameters
  std::shared_ptr<Engine> engine;
  int64_t collectives_outside_boundaries = 0;  // issued by backwards that do not end a cycle
  int64_t zero3_peak_gathered = -1;            // stage 3: most parameter elements gathered at once
};

// `config`: a DeepSpeed-style config (its batch sizes must fit the group's size). The model is
// initialised with a rank-dependent seed: the engine must broadcast rank 0's weights. `group`
// null: one process.
// activation_checkpointing: the model recomputes each decoder layer in backward.
// device: where the model and batches live (the GPU tests pass a CUDA device).
// dropout: the tiny GPT's (0.1); 0 makes each block end in a linear layer, whose backward is then
// the first to need the block's recomputation.
TrainingRun train_tiny_gpt(const std::string& config, std::shared_ptr<parallel::Communicator> group, int steps,
                           bool activation_checkpointing = false, Device device = kCPU, double dropout = 0.1);

// The pieces of train_tiny_gpt, for tests that save, load or look between steps: the tiny GPT's
// engine (rank-dependent initial weights, as above), and `steps` more optimizer steps of it,
// each step's loss appended to `losses`.
Initialized start_tiny_gpt(const std::string& config, std::shared_ptr<parallel::Communicator> group,
                           bool activation_checkpointing = false, Device device = kCPU, double dropout = 0.1);
void train_steps(Initialized& init, int steps, std::vector<double>* losses = nullptr, Device device = kCPU);

// The tiny GPT's shape (2 layers, 30 wide, vocabulary 61, 16 positions, no biases,
// dropout).
models::DecoderConfig tiny_gpt_config();

// The tiny GPT with the same seed on every rank (nothing to broadcast), built whole or shard by
// shard (nn::DeferredInit: each parameter made only when ZeRO stage 3 shards it), trained as
// train_tiny_gpt does.
TrainingRun train_tiny_gpt_same_seed(const std::string& config, std::shared_ptr<parallel::Communicator> group,
                                     int steps, bool deferred);

// Any model (a models::ModelSpec's, or a parallel::PipelineModule stage of one) trained on `data`
// (default: the tiny GPT's, vocabulary 61, 16 positions) for `steps` steps over `groups` (null: one
// process); a pipeline trains one whole step per train_batch. The final weights are the whole
// model's on the ranks of the first stage (ZeRO-3's gathered, tensor-parallel shards assembled,
// the other stages' sent there). `loss`: the model's own (vocabulary-parallel), else cross-entropy.
TrainingRun train_module(const std::string& config, std::shared_ptr<nn::Module> model,
                         const parallel::ProcessGroups* groups, int steps, const LossFunction& loss = nullptr,
                         std::shared_ptr<const Dataset> data = nullptr);

void require_equivalent(const TrainingRun& alone, const TrainingRun& parallel, double bound);

}  // namespace fathom::testing
