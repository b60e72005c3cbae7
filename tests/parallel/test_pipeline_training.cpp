// Pipeline parallelism trains what one process trains. Every schedule (GPipe, 1F1B, interleaved,
// zero bubble) at 2 and 4 stages with 4 and 8 micro-batches, pipeline x data with ZeRO 0-2,
// bf16 and fp16, activation checkpointing, uneven and type-based partitions, a tied embedding on
// the first and last stages, dropout on: every step's loss and, on the rank that holds it, every
// final weight (both copies of the tied embedding) against the one-process run of the same
// precision and micro-batches: f32 within 1e-5 and 16-bit within 1e-2, per step |Δloss|/|loss| and
// per tensor ‖Δw‖/‖w‖. And the errors for bad layouts, on every rank.
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>
#include <memory>
#include <string>
#include <vector>

#include "engine/initialize.h"
#include "engine/pipeline_executor.h"
#include "core/allocator.h"
#include "core/generator.h"
#include "core/memory_stats.h"
#include "models/gpt.h"
#include "nn/activation.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "models/gpt_tensor_parallel.h"
#include "mpi_test_util.h"
#include "nn/loss.h"
#include "parallel/local_communicator.h"
#include "parallel/pipeline_module.h"
#include "test_util.h"
#include "token_batches.h"

using namespace fathom;
using fathom::testing::error_of;
using fathom::testing::runtime;

namespace {

constexpr int kSteps = 3, kRows = 8, kLength = 8, kVocab = 301;

models::GPTConfig tiny_config(int layers) {
  models::GPTConfig c;
  c.n_layer = layers;
  c.n_head = 2;
  c.n_embd = 16;
  c.vocab_size = kVocab;
  c.block_size = 16;
  c.dropout = 0.1;
  return c;
}

using fathom::testing::GlobalBatch;
GlobalBatch global_batch(int step) { return fathom::testing::token_batch(step, kRows, kLength, kVocab); }

Tensor rows_of(const Tensor& t, int64_t offset, int64_t length) { return t.narrow(0, offset, length).contiguous(); }

struct Case {
  int stages = 2, data = 1, micro_batches = 4, chunks = 1, zero = 0, layers = 4, checkpoint_interval = 0;
  std::string schedule = "1f1b", partition = "parameters";
  DType precision = DType::F32;
  int tensor = 1;                 // 3D: the tensor-parallel GPT, cut into stages
  bool sequence_parallel = false;
  bool partitioned = true;        // pipe_partitioned and grad_partitioned
  std::string str() const {
    return detail::concat("pipe ", stages, " x data ", data, " x tensor ", tensor,
                          sequence_parallel ? " (sequence parallel)" : "",
                          tensor > 1 && !partitioned ? " (whole transfers)" : "", ", ", schedule, chunks > 1 ? " v " : "",
                          chunks > 1 ? std::to_string(chunks) : "", ", m ", micro_batches, ", ZeRO ", zero, ", ",
                          dtype_name(precision), ", ", layers, " blocks, partition ", partition,
                          checkpoint_interval ? ", checkpoint every " + std::to_string(checkpoint_interval) : "");
  }
};

// The attention's key bias has a zero gradient in exact arithmetic (softmax ignores a constant
// added to every score), so its computed gradient is rounding noise; Adam's eps keeps that noise
// from being normalised into whole ±lr steps that differ from run to run.
constexpr const char* kOptimizer = R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1, "eps": 1e-6}})";
constexpr const char* kHalfOptimizer = R"({"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}})";

std::string config_json(const Case& c) {
  return detail::concat(
      R"({"train_batch_size": )", kRows, R"(, "gradient_accumulation_steps": )", c.micro_batches,
      R"(, "pipeline": {"stages": )", c.stages, R"(, "schedule": ")", c.schedule, R"(", "virtual_stages": )",
      c.chunks, R"(, "partition": ")", c.partition, R"(", "activation_checkpoint_interval": )", c.checkpoint_interval,
      R"(, "pipe_partitioned": )", c.partitioned ? "true" : "false", R"(, "grad_partitioned": )",
      c.partitioned ? "true" : "false", R"(}, "tensor_parallel": {"autotp_size": )", c.tensor,
      R"(}, "sequence_parallel": )", c.sequence_parallel ? "true" : "false", R"(, "bf16": {"enabled": )", c.precision == DType::BF16 ? "true" : "false", R"(}, "fp16": {"enabled": )",
      c.precision == DType::F16 ? "true" : "false",
      R"(, "initial_scale_power": 8}, "gradient_clipping": 0.5, "zero_optimization": {"stage": )", c.zero,
      R"(}, "optimizer": )", c.precision == DType::F32 ? kOptimizer : kHalfOptimizer, "}");
}

struct Run {
  std::vector<double> losses;
  nn::NamedTensors weights;  // this rank's parameters (its stage's), by their names in the whole model
};

// Steps [from, to) of the run at `c` over the ranks of `world`: loaded from `load_dir` first and
// saved to `save_dir` at the end, when given.
Run train_pipelined(const std::shared_ptr<parallel::Communicator>& world, const Case& c, int from = 0,
                    int to = kSteps, const std::string& load_dir = "", const std::string& save_dir = "") {
  const parallel::ProcessGroups groups(world, parallel::Topology(world->size(), c.stages, c.tensor));
  const models::GPTConfig config = tiny_config(c.layers);
  const parallel::PipelineOptions options{
      .partition = c.partition, .chunks = c.chunks, .activation_checkpoint_interval = c.checkpoint_interval};
  std::shared_ptr<parallel::PipelineModule> stage;
  std::shared_ptr<models::TensorParallelGPT> split;
  if (c.tensor > 1) {  // the tensor-parallel GPT from the whole one's weights, cut into stages
    split = std::make_shared<models::TensorParallelGPT>(config, groups.tensor_ptr(),
                                                        models::TensorParallelGPTOptions{.sequence_parallel = c.sequence_parallel});
    split->load_full(models::GPT(config, /*seed=*/3));
    stage = std::make_shared<parallel::PipelineModule>(split, groups, options);
  } else {  // each stage builds only its own layers
    stage = std::make_shared<parallel::PipelineModule>(
        config.layers(), [&](const std::vector<bool>& built) { return std::make_shared<models::GPT>(config, 3, built); },
        groups, options);
  }
  Initialized init = initialize(Config::from_string(config_json(c)), stage, nullptr, nullptr, groups);
  Engine& engine = *init.engine;
  if (!load_dir.empty()) engine.load_checkpoint(load_dir);
  const int data_rank = groups.coord().data;
  const int64_t rank_rows = kRows / c.data, micro_rows = rank_rows / c.micro_batches;
  Run run;
  for (int s = from; s < to; ++s) {
    const GlobalBatch b = global_batch(s);
    int micro = 0;
    const NextBatch next = [&] {
      const int64_t first = data_rank * rank_rows + micro++ * micro_rows;
      Batch batch;
      batch.inputs = rows_of(b.inputs, first, micro_rows);
      batch.targets = rows_of(b.targets, first, micro_rows);
      batch.sample_index = rows_of(b.sample_index, first, micro_rows);
      return batch;
    };
    const StepReport& report = engine.train_batch(next, [&](const autograd::Variable& logits, const Batch& batch) {
      return split ? split->loss_of_logits(logits, batch.targets) : nn::cross_entropy(logits, batch.targets);
    });
    run.losses.push_back(report.loss);
    const bool reads_data = groups.coord().pipeline == 0 || groups.coord().pipeline == c.stages - 1;
    CHECK(micro == (reads_data ? c.micro_batches : 0));  // only the first and last stages read data
  }
  if (!save_dir.empty()) engine.save_checkpoint(save_dir);
  for (auto& [name, weight] : engine.consolidated_state_dict()) run.weights.emplace_back(name, weight.to(DType::F64));
  return run;
}

// The one-process run of the same model, precision and micro-batches (gradient accumulation
// over the global batch cut into `micro_batches` pieces): AdamW turns the rounding differences
// of other cuts into visible weight differences.
const Run& one_process(DType precision, int layers, int micro_batches) {
  static std::map<std::tuple<DType, int, int>, Run> runs;
  const auto key = std::make_tuple(precision, layers, micro_batches);
  if (!runs.count(key)) {
    Case c{.stages = 1, .micro_batches = micro_batches, .layers = layers};
    c.precision = precision;
    auto model = std::make_shared<models::GPT>(tiny_config(layers), /*seed=*/3);
    std::string json = config_json(c);
    Initialized init = initialize(Config::from_string(json), model, nullptr, nullptr,
                                  std::make_shared<parallel::LocalCommunicator>());
    Run run;
    const int64_t rows = kRows / micro_batches;
    for (int s = 0; s < kSteps; ++s) {
      const GlobalBatch b = global_batch(s);
      for (int k = 0; k < micro_batches; ++k) {
        const autograd::Variable logits = (*init.engine)(autograd::Variable(rows_of(b.inputs, k * rows, rows)),
                                                         rows_of(b.sample_index, k * rows, rows));
        init.engine->backward(nn::cross_entropy(logits, rows_of(b.targets, k * rows, rows)));
        init.engine->step();
      }
      run.losses.push_back(init.engine->last_report().loss);
    }
    for (const auto& [name, parameter] : model->named_parameters())
      run.weights.emplace_back(name, parameter.data().to(DType::F64).clone());
    runs[key] = run;
  }
  return runs.at(key);
}

// ‖a − b‖ / ‖b‖ (docs/architecture.md, "Equivalence"): elementwise bounds would judge the
// rounding that AdamW's normalised update magnifies in near-zero gradients.
double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  REQUIRE(x.size() == y.size());
  double diff = 0, norm = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    diff += (x[k] - y[k]) * (x[k] - y[k]);
    norm += y[k] * y[k];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// `run` holds steps [first_step, ...) of the run `expected` holds from step 0.
void check_same_run(const Run& run, const Run& expected, double tolerance, size_t first_step = 0) {
  REQUIRE(first_step + run.losses.size() == expected.losses.size());
  for (size_t s = 0; s < run.losses.size(); ++s) {
    const double want = expected.losses[first_step + s];
    INFO("step " << first_step + s << ": " << run.losses[s] << " vs one process " << want);
    CHECK(std::fabs(run.losses[s] - want) <= tolerance * std::fabs(want));
  }
  REQUIRE(!run.weights.empty());
  for (const auto& [name, mine] : run.weights) {
    INFO(name);
    const Tensor* want = nullptr;
    for (const auto& [n, t] : expected.weights)
      if (n == name) want = &t;
    REQUIRE(want != nullptr);
    CHECK(relative_difference(mine, *want) <= tolerance);
  }
}

}  // namespace

TEST_CASE("pipeline training: every step's loss and every final weight equal one process's", "[parallel]") {
  const int world = runtime().size();
  std::vector<Case> cases;
  if (world == 2)
    cases = {{.micro_batches = 4},
             {.micro_batches = 8},
             {.micro_batches = 4, .schedule = "gpipe"},
             {.micro_batches = 8, .schedule = "zero_bubble"},
             {.micro_batches = 4, .chunks = 2, .schedule = "interleaved"},
             {.micro_batches = 8, .chunks = 3, .layers = 6, .schedule = "interleaved"},
             {.micro_batches = 1},  // fewer micro-batches than stages: allowed, with a warning
             {.micro_batches = 4, .layers = 3, .partition = "uniform"},  // 5 layers: uneven
             {.micro_batches = 4, .layers = 3, .partition = "type:TransformerBlock"},
             {.micro_batches = 4, .checkpoint_interval = 2},
             {.micro_batches = 4, .zero = 1},
             {.micro_batches = 4, .zero = 2, .schedule = "zero_bubble"},
             {.micro_batches = 4, .precision = DType::BF16},
             {.micro_batches = 4, .schedule = "zero_bubble", .precision = DType::BF16},
             {.micro_batches = 4, .precision = DType::F16}};
  if (world == 4)
    cases = {{.stages = 4, .micro_batches = 4},
             {.stages = 4, .micro_batches = 8},
             {.stages = 4, .micro_batches = 4, .schedule = "gpipe"},
             {.stages = 4, .micro_batches = 8, .schedule = "gpipe"},
             {.stages = 4, .micro_batches = 4, .schedule = "zero_bubble"},
             {.stages = 4, .micro_batches = 8, .schedule = "zero_bubble"},
             {.stages = 4, .micro_batches = 4, .chunks = 2, .layers = 6, .schedule = "interleaved"},
             {.stages = 4, .micro_batches = 8, .chunks = 2, .layers = 6, .schedule = "interleaved"},
             {.stages = 4, .micro_batches = 4, .layers = 2},  // a stage with one layer, 4 layers in all
             {.stages = 2, .data = 2, .micro_batches = 4, .zero = 0},
             {.stages = 2, .data = 2, .micro_batches = 4, .zero = 1},
             {.stages = 2, .data = 2, .micro_batches = 4, .zero = 2},
             {.stages = 2, .data = 2, .micro_batches = 4, .zero = 2, .schedule = "zero_bubble"},
             {.stages = 2, .data = 2, .micro_batches = 2, .chunks = 2, .zero = 1, .schedule = "interleaved"},
             {.stages = 2, .data = 2, .micro_batches = 4, .zero = 1, .precision = DType::BF16},
             // 3D without the data axis: pipe 2 x tensor 2.
             {.micro_batches = 4, .tensor = 2},
             {.micro_batches = 4, .tensor = 2, .partitioned = false},
             {.micro_batches = 4, .schedule = "zero_bubble", .tensor = 2, .sequence_parallel = true},
             {.micro_batches = 4, .chunks = 2, .schedule = "interleaved", .tensor = 2}};
  if (world == 8)  // pipe 2 x tensor 2 x data 2 (oversubscribed: a tiny model)
    cases = {{.micro_batches = 2, .zero = 1, .tensor = 2},
             {.micro_batches = 2, .zero = 2, .schedule = "zero_bubble", .tensor = 2, .sequence_parallel = true}};
  for (Case c : cases) {
    c.data = world / (c.stages * c.tensor);
    INFO(c.str() << " at " << world << " ranks");
    check_same_run(train_pipelined(runtime().world_ptr(), c), one_process(c.precision, c.layers, c.micro_batches * c.data),
                   c.precision == DType::F32 ? 1e-5 : 1e-2);
  }
}

// The tensor-parallel GPT at (tensor `tensor`, data world / tensor, ZeRO `zero`), steps [from, to)
// after loading `load_dir`.
Run train_tensor_parallel(const std::shared_ptr<parallel::Communicator>& world, int tensor, int zero, int micro_batches,
                          int from, int to, const std::string& load_dir) {
  const parallel::ProcessGroups groups(world, parallel::Topology(world->size(), 1, tensor));
  auto model = std::make_shared<models::TensorParallelGPT>(tiny_config(4), groups.tensor_ptr());
  const Case c{.stages = 1, .micro_batches = micro_batches, .zero = zero, .tensor = tensor};
  Initialized init = initialize(Config::from_string(config_json(c)), model, nullptr, nullptr, groups);
  init.engine->load_checkpoint(load_dir);
  const int data = groups.data().size(), data_rank = groups.coord().data;
  const int64_t rank_rows = kRows / data, micro_rows = rank_rows / micro_batches;
  Run run;
  for (int s = from; s < to; ++s) {
    const GlobalBatch b = global_batch(s);
    for (int k = 0; k < micro_batches; ++k) {
      const int64_t first = data_rank * rank_rows + k * micro_rows;
      const autograd::Variable logits =
          (*init.engine)(autograd::Variable(rows_of(b.inputs, first, micro_rows)), rows_of(b.sample_index, first, micro_rows));
      init.engine->backward(model->loss_of_logits(logits, rows_of(b.targets, first, micro_rows)));
      init.engine->step();
    }
    run.losses.push_back(init.engine->last_report().loss);
  }
  run.weights = init.engine->consolidated_state_dict();
  for (auto& [name, weight] : run.weights) weight = weight.to(DType::F64);
  return run;
}

TEST_CASE("pipeline checkpoints resume at other pipeline, tensor, data and ZeRO layouts", "[parallel][checkpoint]") {
  const int world = runtime().size();
  if (world != 2 && world != 4) return;
  const std::string root = "/tmp/fathom_pp_resume_np" + std::to_string(world);
  if (runtime().rank() == 0) std::filesystem::remove_all(root);
  runtime().world_ptr()->barrier();
  // Saved after two steps by pipe 2 x data 2 at ZeRO 1 (at 2 ranks pipe 2 x data 1, ZeRO 0); every
  // layout cuts the 8 rows of a step into 4 micro-batches of 2.
  const int micro = 4;
  const Case saved_at{.stages = 2, .data = world / 2, .micro_batches = micro / (world / 2), .zero = world == 4 ? 1 : 0};
  const Run& uninterrupted = one_process(DType::F32, 4, micro);
  const Run first = train_pipelined(runtime().world_ptr(), saved_at, 0, 2, "", root);
  for (int s = 0; s < 2; ++s) CHECK(std::fabs(first.losses[s] - uninterrupted.losses[s]) <= 1e-5 * uninterrupted.losses[s]);
  runtime().world_ptr()->barrier();

  // One process (every rank alone), and at 4 ranks pipe 4 x data 1 at ZeRO 0.
  const auto alone = runtime().world_ptr()->split(runtime().rank(), 0, "alone");
  check_same_run(train_pipelined(alone, {.stages = 1, .micro_batches = micro}, 2, kSteps, root), uninterrupted, 1e-6, 2);
  if (world == 4) {
    check_same_run(train_pipelined(runtime().world_ptr(), {.stages = 4, .micro_batches = micro}, 2, kSteps, root),
                   uninterrupted, 1e-6, 2);
    // Tensor 2 x data 2 at ZeRO 2: the tensor-parallel GPT reads the pipeline's whole tensors.
    check_same_run(train_tensor_parallel(runtime().world_ptr(), 2, 2, micro / 2, 2, kSteps, root), uninterrupted,
                   1e-6, 2);
  }
  runtime().world_ptr()->barrier();
  // A stage of a model with more layers finds tensors the checkpoint does not have.
  const parallel::ProcessGroups groups(runtime().world_ptr(), parallel::Topology(world, 2, 1));
  auto deeper = std::make_shared<parallel::PipelineModule>(std::make_shared<models::GPT>(tiny_config(6), 3), groups);
  Case c{.stages = 2, .data = world / 2, .micro_batches = 2};
  Initialized init = initialize(Config::from_string(config_json(c)), deeper, nullptr, nullptr, groups);
  const std::string error = error_of([&] { init.engine->load_checkpoint(root); });
  CHECK(error.find("it was saved from another model") != std::string::npos);
}

namespace {
// A user's layer list: a parameterless GELU, then a linear layer. Cut over two stages, the first
// stage is the GELU alone: no parameters, and an output that needs no gradient.
struct GeluThenLinear : nn::Module, nn::LayerSequence {
  std::shared_ptr<nn::GELU> act = register_module("act", std::make_shared<nn::GELU>());
  std::shared_ptr<nn::Linear> linear = register_module("linear", std::make_shared<nn::Linear>(6, 3));
  explicit GeluThenLinear(uint64_t seed) {
    Generator gen(seed);
    for (const auto& [name, parameter] : named_parameters()) nn::init::normal_(parameter, gen, 0.0, 0.5);
  }
  autograd::Variable forward(const autograd::Variable& x) override { return forward_layers(x); }
  size_t num_layers() const override { return 2; }
  autograd::Variable forward_layer(size_t layer, const autograd::Variable& x) override {
    return layer == 0 ? (*act)(x) : (*linear)(x);
  }
  std::vector<std::string> layer_parameters(size_t layer) const override {
    return layer == 0 ? std::vector<std::string>{} : std::vector<std::string>{"linear.weight", "linear.bias"};
  }
  std::string layer_type(size_t layer) const override { return layer == 0 ? "GELU" : "Linear"; }
};
}  // namespace

TEST_CASE("pipeline: a stage without parameters, whose output needs no gradient, trains as one process", "[parallel]") {
  if (runtime().size() != 2) return;
  const parallel::ProcessGroups groups(runtime().world_ptr(), parallel::Topology(2, 2, 1));
  const std::string json = R"({"train_batch_size": 4, "gradient_accumulation_steps": 2, "pipeline": {"stages": 2},
      "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})";
  const auto stage = std::make_shared<parallel::PipelineModule>(std::make_shared<GeluThenLinear>(7), groups,
                                                                parallel::PipelineOptions{.partition = "type:Linear"});
  CHECK(stage->boundaries() == std::vector<size_t>{0, 1, 2});
  CHECK(stage->named_parameters().size() == (groups.coord().pipeline == 0 ? 0u : 2u));
  Initialized pipelined = initialize(Config::from_string(json), stage, nullptr, nullptr, groups);
  auto whole = std::make_shared<GeluThenLinear>(7);
  Initialized alone = initialize(Config::from_string(R"({"train_batch_size": 4, "gradient_accumulation_steps": 2,
      "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})"), whole, nullptr, nullptr,
                                 std::make_shared<parallel::LocalCommunicator>());
  Generator gen(3);
  for (int step = 0; step < 3; ++step) {
    std::vector<Batch> batches;
    for (int k = 0; k < 2; ++k)
      batches.push_back({uniform({2, 6}, gen), Tensor::from_vector<int64_t>({(step + k) % 3, (step + 2 * k) % 3}),
                         Tensor::from_vector<int64_t>({4 * step + 2 * k, 4 * step + 2 * k + 1})});
    size_t a = 0, b = 0;
    const double loss = pipelined.engine->train_batch([&] { return batches.at(a++); }).loss;
    const double expected = alone.engine->train_batch([&] { return batches.at(b++); }).loss;
    CHECK(std::fabs(loss - expected) <= 1e-6 * std::fabs(expected));
  }
  for (const auto& [name, parameter] : stage->named_parameters()) {
    INFO(name);
    CHECK(relative_difference(parameter.data().to(DType::F64), whole->parameter(name).data().to(DType::F64)) <= 1e-6);
  }
}

TEST_CASE("pipeline: a stage holds only its layers' parameters, named as in the whole model", "[parallel]") {
  const int world = runtime().size();
  const parallel::ProcessGroups groups(runtime().world_ptr(), parallel::Topology(world, world, 1));
  auto gpt = std::make_shared<models::GPT>(tiny_config(2 * world), 3);
  const parallel::PipelineModule stage(gpt, groups, {.partition = "uniform"});
  const int s = groups.coord().pipeline;
  std::vector<std::string> names;
  for (const auto& [name, parameter] : stage.named_parameters()) names.push_back(name);
  // Uniform over 2·world + 2 layers: stage 0 takes the embedding and a block (plus the remainder).
  CHECK(stage.boundaries().front() == 0);
  CHECK(stage.boundaries().back() == gpt->num_layers());
  for (const std::string& name : names) {
    INFO(name);
    bool of_this_stage = false;
    for (size_t layer = stage.boundaries()[s]; layer < stage.boundaries()[s + 1]; ++layer)
      for (const std::string& own : gpt->layer_parameters(layer)) of_this_stage = of_this_stage || own == name;
    CHECK(of_this_stage);
  }
  const bool first = s == 0, last = s == world - 1;
  CHECK((std::find(names.begin(), names.end(), "transformer.wte.weight") != names.end()) == (first || last));
  CHECK(stage.ties().size() == (first || last ? 1u : 0u));
  if (first || last) {
    CHECK(stage.placement("transformer.wte.weight").tie == "embedding");
    CHECK(stage.placement("transformer.wte.weight").tie_leader == first);  // counted once, on the first stage
  }
  // The other stages' parameters are released.
  int64_t kept = 0;
  for (const auto& [name, parameter] : gpt->named_parameters()) kept += parameter.numel();
  CHECK(kept == stage.parameter_count());
}

TEST_CASE("pipeline: a stage built alone allocates only its layers, with the whole model's values", "[parallel]") {
  const int world = runtime().size();
  const parallel::ProcessGroups groups(runtime().world_ptr(), parallel::Topology(world, world, 1));
  const models::GPTConfig config = tiny_config(4 * world);
  Allocator& cpu = allocator_for(kCPU);
  const int64_t before = cpu.stats().snapshot()[MemoryTag::Parameters].current;
  cpu.stats().reset_peak();
  const parallel::PipelineModule stage(
      config.layers(), [&](const std::vector<bool>& built) { return std::make_shared<models::GPT>(config, 3, built); },
      groups, {.partition = "uniform"});
  // Never more than the stage's own parameters (f32: 4 bytes each) and, while a layer is made, a
  // transient of the size of its largest tensor (nn::Linear makes the head's own weight before it
  // is tied to the embedding) — never the whole model.
  const int64_t peak = cpu.stats().snapshot()[MemoryTag::Parameters].peak - before;
  const int64_t largest = 4 * config.vocab_size * config.n_embd;
  INFO("peak " << peak << " bytes, the stage's parameters " << 4 * stage.parameter_count() << ", the model's "
               << 4 * config.parameter_count());
  CHECK(peak <= 4 * stage.parameter_count() + 2 * largest);
  CHECK(peak < 4 * config.parameter_count());
  const models::GPT whole(config, 3);
  for (const auto& [name, parameter] : stage.named_parameters()) {
    INFO(name);
    CHECK(parameter.data().to_vector<float>() == whole.parameter(name).data().to_vector<float>());
  }
  std::vector<bool> only_first(whole.num_layers(), false);
  only_first[0] = true;
  models::GPT first_only(config, 3, only_first);
  CHECK(error_of([&] { first_only.forward_layer(1, autograd::Variable(Tensor::zeros({1, 4, config.n_embd}))); }) ==
        "GPT: layer 1 is not built here (another pipeline stage builds it)");
  // Its boundaries are the built model's: the description agrees with the model.
  const auto described = config.layers();
  for (size_t layer = 0; layer < whole.num_layers(); ++layer) {
    int64_t count = 0;
    for (const std::string& name : whole.layer_parameters(layer)) count += whole.parameter(name).numel();
    CHECK(described[layer].parameters == count);
    CHECK(described[layer].type == whole.layer_type(layer));
  }
}

TEST_CASE("pipeline: bad layouts are refused on every rank", "[parallel]") {
  const int world = runtime().size();
  const parallel::ProcessGroups groups(runtime().world_ptr(), parallel::Topology(world, world, 1));
  const auto gpt = [&] { return std::make_shared<models::GPT>(tiny_config(world), 3); };  // world + 2 layers
  const auto three_layers = std::make_shared<models::GPT>(tiny_config(1), 3);
  CHECK(error_of([&] { parallel::PipelineModule(three_layers, groups, {.chunks = 2}); }) ==
        detail::concat("pipeline: ", 2 * world, " virtual stages (stages x virtual_stages) but the model has 3 layers; "
                       "use at most 3 virtual stages"));
  CHECK(error_of([&] { parallel::PipelineModule(gpt(), groups, {.partition = "balanced"}); })
            .find("unknown pipeline partition method \"balanced\"") == 0);
  // The config's degree must be the groups'.
  Case c{.stages = world + 1};
  auto stage = std::make_shared<parallel::PipelineModule>(gpt(), groups);
  CHECK(error_of([&] { initialize(Config::from_string(config_json(c)), stage, nullptr, nullptr, groups); })
            .find(detail::concat("initialize: the config's pipeline.stages is ", world + 1,
                                 " but the process groups' pipeline axis has ", world, " ranks")) == 0);
  c = Case{.stages = world, .zero = 3};
  CHECK(error_of([&] { initialize(Config::from_string(config_json(c)), stage, nullptr, nullptr, groups); })
            .find("config error at zero_optimization.stage: ZeRO stage 3 with a pipeline is not supported") == 0);
  // Megatron's interleaved schedule takes micro-batches in groups of p.
  c = Case{.stages = world, .micro_batches = world / 2, .schedule = "interleaved"};
  CHECK(error_of([&] { initialize(Config::from_string(config_json(c)), stage, nullptr, nullptr, groups); })
            .find("must be a multiple of the stages") != std::string::npos);
  // A model that is not a list of layers cannot be cut.
  CHECK(error_of([&] { parallel::PipelineModule(std::make_shared<nn::Linear>(4, 4), groups); })
            .find("PipelineModule: Linear is not a list of layers") == 0);
  // Without a PipelineModule, a pipeline axis is an error naming the fix.
  CHECK(error_of([&] { initialize(Config::from_string(config_json({.stages = world})), gpt(), nullptr, nullptr, groups); })
            .find("wrap it in a parallel::PipelineModule") != std::string::npos);
}
