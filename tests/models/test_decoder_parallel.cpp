// The Llama-family decoder computes the single-process function in every data-parallel and
// memory-saving mode, and cut into pipeline stages: a tiny Llama (GQA 4:2, RoPE, untied
// embeddings, SwiGLU) trained 12 steps at data 2, ZeRO 1, 2 and 3 (every parameter partitioned:
// stage3_param_persistence_threshold 0), ZeRO-3 built shard by shard, with parameters and
// optimizer offloaded to the CPU, the optimizer to nvme, activation checkpointing, bf16, and
// pipeline 2 (x tensor 2 at 4 ranks) and tensor 2 (x data 2, ZeRO 0 and 3; with and without
// sequence parallelism; tied and untied) matches one process at stage 0 — every step's loss and
// every final weight, f32 within 1e-5, bf16 within 1e-2.
#include <filesystem>
#include <optional>

#include "core/allocator.h"
#include "engine/data/token_dataset.h"
#include "gpt_training.h"
#include "models/hf_weights.h"
#include "models/decoder.h"
#include "models/model_spec.h"
#include "mpi_test_util.h"
#include "nn/deferred_init.h"
#include "parallel/partitioned_checkpoint.h"
#include "parallel/pipeline_module.h"
#include "test_util.h"
#include "zero/sharded_state.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::require_equivalent;
using fathom::testing::runtime;
using fathom::testing::train_module;
using fathom::testing::TrainingRun;

namespace {

constexpr int kSteps = 12;

// The shape of the GPT equivalence tests' data: vocabulary 61, 16 positions; 36 wide so no
// parameter count divides evenly over the ranks.
models::ModelSpec tiny_llama() {
  models::ModelSpec spec = models::ModelSpec::preset("llama", "tiny");
  models::DecoderConfig& c = spec.decoder;
  c.hidden_size = 32, c.n_head = 4, c.n_kv_head = 2, c.intermediate_size = 56;
  c.vocab_size = 61, c.max_positions = 16;
  return spec;
}

// bf16 runs differ from one process by the rounding of gradients summed over other row subsets,
// which Adam turns into weight differences growing like lr x steps (tests/zero/test_zero.cpp); a
// real defect (a missing shard, a wrong average) shows as O(1).
constexpr double kBf16Bound = 1e-2;

// Text a tiny model learns within the steps: a period of 12 over 61 ids (the GPT tests' data
// is too irregular for a 2-layer model to show its loss falling in 12 steps).
std::shared_ptr<const Dataset> learnable_data() {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 96 * 16 + 1; ++i) tokens.push_back(static_cast<uint16_t>((i % 12) * 5 % 61));
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, 16, 61));
}

std::string config_text(int stage, bool bf16, const std::string& zero_extra = "", const std::string& extra = "") {
  return detail::concat(R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 3e-3,
      "weight_decay": 0.1}}, "gradient_clipping": 1.0, "seed": 7, "bf16": {"enabled": )", bf16 ? "true" : "false", R"(}, "zero_optimization": {"stage": )", stage, zero_extra,
                        "}", extra, "}");
}

std::shared_ptr<nn::Module> build(bool deferred = false, bool tied = false, int64_t kv_heads = 2) {
  std::optional<nn::DeferredInit> scope;
  if (deferred) scope.emplace();
  models::ModelSpec spec = tiny_llama();
  spec.decoder.tied_embeddings = tied;
  spec.decoder.n_kv_head = kv_heads;
  return spec.build(/*seed=*/1000);
}

TrainingRun alone(bool bf16, bool tied = false, int64_t kv_heads = 2) {
  return train_module(config_text(0, bf16), build(false, tied, kv_heads), nullptr, kSteps, nullptr, learnable_data());
}

// Tensor 2 x data (world / 2); none at an odd world size.
std::optional<parallel::ProcessGroups> tensor_2_groups() {
  const auto& world = runtime().world_ptr();
  if (world->size() % 2 != 0) return std::nullopt;
  return parallel::ProcessGroups(world, parallel::Topology(world->size(), /*pipeline=*/1, /*tensor=*/2));
}

// `whole`'s decoder with its layers split over the tensor group, from its weights.
std::shared_ptr<models::Decoder> split_over(const models::Decoder& whole, const parallel::ProcessGroups& groups,
                                            bool sequence_parallel) {
  auto split = std::make_shared<models::Decoder>(
      whole.config(), 1000, std::vector<bool>(whole.num_layers(), true),
      std::make_shared<models::TensorParallelDecoderLayers>(groups.tensor_ptr(), sequence_parallel));
  split->load_full(whole);
  return split;
}

// `split` trained at tensor 2 (ZeRO `stage` over the data ranks, every parameter partitioned at 3).
TrainingRun train_split(const std::shared_ptr<models::Decoder>& split, const parallel::ProcessGroups& groups,
                        int stage, bool sequence_parallel) {
  const LossFunction loss = [split](const autograd::Variable& logits, const Batch& batch) {
    return split->loss(logits, batch.targets, batch.loss_normaliser);
  };
  const std::string stage3 = stage == 3 ? R"(, "stage3_param_persistence_threshold": 0)" : "";
  TrainingRun run = train_module(
      config_text(stage, false, stage3,
                  detail::concat(R"(, "tensor_parallel": {"autotp_size": 2}, "sequence_parallel": )",
                                 sequence_parallel ? "true" : "false")),
      split, &groups, kSteps, loss, learnable_data());
  if (stage == 3) fathom::testing::require_stage3_partitioned(*run.engine);
  return run;
}

}  // namespace

TEST_CASE("a tiny Llama trains as one process does at data 2, ZeRO 1/2/3, shard by shard, offload cpu and nvme, "
          "activation checkpointing and bf16",
          "[models][zero]") {
  const std::string stage3 = R"(, "stage3_param_persistence_threshold": 0)";
  const std::string cpu = stage3 + R"(, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"})";
  // One folder for the job's ranks (each writes its own swap files); made before it is used.
  const std::string swap = "/tmp/fathom_test_decoder_nvme_np" + std::to_string(runtime().world().size());
  std::filesystem::create_directories(swap);
  const std::string nvme = R"(, "offload_optimizer": {"device": "nvme", "nvme_path": ")" + swap + R"("})";
  const TrainingRun f32 = alone(false), bf16 = alone(true);
  struct Mode {
    const char* name;
    int stage;
    bool bf16 = false, deferred = false, checkpointing = false;
    std::string zero;
  };
  const std::vector<Mode> modes{
      {"data parallel", 0},
      {"ZeRO 1", 1},
      {"ZeRO 2", 2},
      {"ZeRO 3", 3, false, false, false, stage3},
      {"ZeRO 3 shard by shard", 3, false, true, false, stage3},
      {"ZeRO 3 offload cpu", 3, false, false, false, cpu},
      {"ZeRO 2 offload nvme", 2, false, false, false, nvme},
      {"ZeRO 3 activation checkpointing", 3, false, false, true, stage3},
      {"ZeRO 3 bf16", 3, true, false, false, stage3},
  };
  for (const Mode& mode : modes) {
    INFO(mode.name << ", " << runtime().world().size() << " ranks");
    auto model = build(mode.deferred);
    if (mode.checkpointing) {
      nn::LayerSequence& layers = models::layer_sequence(*model);
      layers.set_checkpointing(nn::checkpoint_layers_of_type(layers, "DecoderLayer"));
    }
    const parallel::ProcessGroups groups = parallel::ProcessGroups::data_parallel(runtime().world_ptr());
    const TrainingRun run =
        train_module(config_text(mode.stage, mode.bf16, mode.zero), model, &groups, kSteps, nullptr, learnable_data());
    if (mode.stage == 3) fathom::testing::require_stage3_partitioned(*run.engine);
    if (mode.zero == nvme) CHECK(!std::filesystem::is_empty(swap));  // the swap files were written there
    require_equivalent(mode.bf16 ? bf16 : f32, run, mode.bf16 ? kBf16Bound : 1e-5);
  }
  runtime().world().barrier();  // every rank is done with its swap files
  if (runtime().world().rank() == 0) std::filesystem::remove_all(swap);
}

TEST_CASE("a tiny Llama split over tensor 2 (x data 2, ZeRO 0 and 3; with sequence parallelism) trains as one "
          "process does, tied or untied",
          "[models][parallel]") {
  const std::optional<parallel::ProcessGroups> tensor_2 = tensor_2_groups();
  if (!tensor_2) return;
  const parallel::ProcessGroups& groups = *tensor_2;
  for (bool tied : {false, true}) {
    const TrainingRun one = alone(false, tied);
    for (int stage : {0, 3})
    for (bool sequence_parallel : {false, true}) {
      if (stage == 3 && groups.data().size() == 1) continue;  // ZeRO over the data-parallel ranks
      INFO((tied ? "tied" : "untied") << ", ZeRO " << stage << ", tensor 2 x data " << groups.data().size()
                                      << (sequence_parallel ? ", sequence parallel" : ""));
      const auto split =
          split_over(*std::static_pointer_cast<models::Decoder>(build(false, tied)), groups, sequence_parallel);
      // Each rank holds 2 of q's 4 heads of 8 (16 rows), 1 of the 2 key/value heads, half the MLP's 56.
      CHECK(split->parameter("model.layers.0.self_attn.q_proj.weight").size(0) == 16);
      CHECK(split->parameter("model.layers.0.self_attn.k_proj.weight").size(0) == 8);
      CHECK(split->parameter("model.layers.0.mlp.gate_proj.weight").size(0) == 28);
      require_equivalent(one, train_split(split, groups, stage, sequence_parallel), 1e-5);
    }
  }
}

TEST_CASE("a multi-query Llama over tensor 2 (one key/value head, replicated on both ranks as Megatron does; x data "
          "2 at ZeRO 3, with sequence parallelism) trains as one process does",
          "[models][parallel]") {
  const std::optional<parallel::ProcessGroups> tensor_2 = tensor_2_groups();
  if (!tensor_2) return;
  const parallel::ProcessGroups& groups = *tensor_2;
  const TrainingRun one = alone(false, false, /*kv_heads=*/1);
  for (bool sequence_parallel : {false, true}) {
    const int stage = groups.data().size() > 1 ? 3 : 0;
    INFO("ZeRO " << stage << ", tensor 2 x data " << groups.data().size() << (sequence_parallel ? ", sequence parallel" : ""));
    const auto split =
        split_over(*std::static_pointer_cast<models::Decoder>(build(false, false, 1)), groups, sequence_parallel);
    // q split (2 of 4 heads of 8: 16 rows), the one key/value head whole on both ranks (8 rows).
    CHECK(split->parameter("model.layers.0.self_attn.q_proj.weight").size(0) == 16);
    CHECK(split->parameter("model.layers.0.self_attn.k_proj.weight").size(0) == 8);
    CHECK(split->parameter("model.layers.0.self_attn.v_proj.weight").size(0) == 8);
    require_equivalent(one, train_split(split, groups, stage, sequence_parallel), 1e-5);
  }
}

TEST_CASE("a tiny Llama over tensor 2 with partitioned activation checkpoints (each checkpointed layer keeps 1/tp of "
          "its input, all-gathered for the recompute) trains as one process does",
          "[models][parallel]") {
  const std::optional<parallel::ProcessGroups> tensor_2 = tensor_2_groups();
  if (!tensor_2) return;
  const parallel::ProcessGroups& groups = *tensor_2;
  const TrainingRun one = alone(false);
  const int stage = groups.data().size() > 1 ? 3 : 0;
  // Tensor-group collectives of a run: checkpointing every layer, with its input partitioned or not.
  const auto collectives = [&](bool partitioned) {
    const auto split = split_over(*std::static_pointer_cast<models::Decoder>(build()), groups, false);
    nn::CheckpointPolicy policy = nn::checkpoint_layers_of_type(*split, "DecoderLayer");
    if (partitioned) policy = parallel::partition_checkpoint_inputs(std::move(policy), groups.tensor_ptr());
    split->set_checkpointing(std::move(policy));
    const int64_t before = groups.tensor().collectives_issued();
    const TrainingRun run = train_split(split, groups, stage, false);
    require_equivalent(one, run, 1e-5);
    return groups.tensor().collectives_issued() - before;
  };
  // The partitioned inputs' all-gathers for the recompute are the collectives it adds.
  CHECK(collectives(true) > collectives(false));
}

namespace {
const char* kPipelineConfig = R"({"train_batch_size": 8, "gradient_accumulation_steps": 4,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}}, "gradient_clipping": 1.0,
    "seed": 7, "pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": %d}})";
std::string pipeline_config(int tensor) {
  char text[512];
  std::snprintf(text, sizeof text, kPipelineConfig, tensor);
  return text;
}
}  // namespace

TEST_CASE("a tiny Llama cut into 2 pipeline stages (each building only its layers; x tensor 2 at 4 ranks) trains "
          "as one process does",
          "[models][pipeline]") {
  const auto& world = runtime().world_ptr();
  if (world->size() != 2 && world->size() != 4) return;
  const int tensor = world->size() / 2;
  const parallel::ProcessGroups groups(world, parallel::Topology(world->size(), /*pipeline=*/2, tensor));
  const models::ModelSpec spec = tiny_llama();
  std::shared_ptr<parallel::PipelineModule> stage;
  LossFunction loss;
  if (tensor == 1) {
    size_t built_here = 0;
    stage = std::make_shared<parallel::PipelineModule>(
        spec.layers(),
        [&](const std::vector<bool>& built) {
          for (bool b : built) built_here += b ? 1 : 0;
          return spec.build(1000, built);
        },
        groups, parallel::PipelineOptions{});
    CHECK(built_here < spec.layers().size());  // this stage built only its own layers
  } else {  // 3D: the tensor-parallel decoder, from the whole one's weights, cut into stages
    const auto whole = std::static_pointer_cast<models::Decoder>(build());
    auto split = std::make_shared<models::Decoder>(whole->config(), 1000, std::vector<bool>(whole->num_layers(), true),
                                                   std::make_shared<models::TensorParallelDecoderLayers>(groups.tensor_ptr()));
    split->load_full(*whole);
    stage = std::make_shared<parallel::PipelineModule>(split, groups, parallel::PipelineOptions{});
    loss = [split](const autograd::Variable& logits, const Batch& batch) {
      return split->loss(logits, batch.targets, batch.loss_normaliser);
    };
  }
  const TrainingRun run = train_module(pipeline_config(tensor), stage, &groups, kSteps, loss, learnable_data());
  const std::string one = R"({"train_batch_size": 8, "gradient_accumulation_steps": 4,
      "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}}, "gradient_clipping": 1.0,
      "seed": 7})";
  const TrainingRun reference = train_module(one, build(), nullptr, kSteps, nullptr, learnable_data());
  if (groups.coord().pipeline == 0) require_equivalent(reference, run, 1e-5);
}
