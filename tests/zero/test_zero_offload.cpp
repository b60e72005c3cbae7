// Optimizer offload (zero_optimization.offload_optimizer; docs/offload.md) moves data, never
// arithmetic: with device cpu or nvme, at ZeRO stages 1-3, f32 and bf16, gradient accumulation 1
// and 2, several sub-groups and a partial offload, every step's loss and every final weight equal
// the run without offload bit for bit. The tiers are told apart by the allocators' tagged counters
// (on a CPU-only machine every tier is host memory); checkpoints go through the swap files; a
// damaged swap file, a full disk and bad paths end the step with errors that say what to do.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/allocator.h"
#include "engine/checkpoint/export.h"
#include "engine/initialize.h"
#include "gpt_training.h"
#include "mpi_test_util.h"
#include "offload/host_memory.h"
#include "offload/io_faults.h"
#include "models/hf_weights.h"
#include "nn/containers.h"
#include "nn/deferred_init.h"
#include "nn/linear.h"
#include "test_util.h"
#include "zero/sharded_state.h"
#include "zero/swapped_parameters.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::require_stage3_partitioned;
using fathom::testing::runtime;
using fathom::testing::start_tiny_gpt;
using fathom::testing::train_steps;
using fathom::testing::train_tiny_gpt;
using fathom::testing::train_tiny_gpt_same_seed;
using fathom::testing::TrainingRun;
namespace fs = std::filesystem;

namespace {
constexpr int kSteps = 4;

// A directory every rank shares, removed at the end (the test's working directory is on a local
// disk, which O_DIRECT needs; /tmp may be a tmpfs that lacks it on older kernels).
struct Scratch {
  std::string path;
  explicit Scratch(const std::string& name) : path((fs::current_path() / ("offload-test-" + name)).string()) {
    runtime().world().barrier();
    if (runtime().world().rank() == 0) {
      fs::remove_all(path);
      fs::create_directories(path);
    }
    runtime().world().barrier();
  }
  ~Scratch() {
    runtime().world().barrier();
    if (runtime().world().rank() == 0) fs::remove_all(path);
  }
};

std::string config_text(int stage, int gas, bool bf16, const std::string& offload = "", const std::string& extra = "") {
  return detail::concat(R"({"train_batch_size": 24, "gradient_accumulation_steps": )", gas,
                        R"(, "optimizer": {"type": "AdamW", "params": {"lr": 5e-4, "weight_decay": 0.1}},
      "gradient_clipping": 1.0, "seed": 7, "bf16": {"enabled": )",
                        bf16 ? "true" : "false", R"(}, "zero_optimization": {"stage": )", stage,
                        stage == 3 ? R"(, "stage3_param_persistence_threshold": 0)" : "",
                        offload.empty() ? "" : ", " + offload, "}", extra, "}");
}

// Both pipelines: three sub-groups of three tensors (Adam's master and moments) in memory at once.
std::string nvme(const std::string& path, int buffer_count = 9) {
  return R"("sub_group_size": 2000, "offload_optimizer": {"device": "nvme", "nvme_path": ")" + path +
         R"(", "buffer_count": )" + std::to_string(buffer_count) +
         R"(, "pipeline_read": true, "pipeline_write": true})";
}
const std::string kCpu = R"("sub_group_size": 2000, "offload_optimizer": {"device": "cpu"})";

// Parameter offload to nvme with small bounds: three reads or writes in flight, pieces of at most
// 4000 elements (the tiny GPT's largest is its 3600-element MLP weight), at most 8000 elements
// in memory — under a third of the model's, so pieces are evicted and read again every step.
constexpr int64_t kBufferCount = 3, kBufferSize = 4000, kMaxInCpu = 8000;
std::string nvme_param(const std::string& path, int64_t max_in_cpu = kMaxInCpu) {
  return detail::concat(R"("offload_param": {"device": "nvme", "nvme_path": ")", path, R"(", "buffer_count": )",
                        kBufferCount, R"(, "buffer_size": )", kBufferSize, R"(, "max_in_cpu": )", max_in_cpu, "}");
}

void require_identical(const TrainingRun& expected, const TrainingRun& actual) {
  REQUIRE(actual.losses == expected.losses);
  REQUIRE(actual.weights.size() == expected.weights.size());
  for (size_t i = 0; i < expected.weights.size(); ++i) {
    INFO(expected.weights[i].first);
    REQUIRE(actual.weights[i].second.to_vector<double>() == expected.weights[i].second.to_vector<double>());
  }
}

const zero::SwappedParameters& swapped_of(const Engine& engine) {
  const zero::ShardedState* sharded = zero::as_sharded(engine.training_state());
  REQUIRE(sharded != nullptr);
  const auto* swapped = dynamic_cast<const zero::SwappedParameters*>(&sharded->flat_parameters().shard());
  REQUIRE(swapped != nullptr);
  return *swapped;
}

const zero::OptimizerShard& shard_of(const Engine& engine) {
  const zero::ShardedState* sharded = zero::as_sharded(engine.training_state());
  REQUIRE(sharded != nullptr);
  return sharded->optimizer_shard();
}

int64_t bytes(Allocator& allocator, MemoryTag tag) { return allocator.stats().snapshot()[tag].current; }

// What starting an engine with `config` says, or "(no error)".
std::string error_of(const std::string& config) {
  try {
    start_tiny_gpt(config, runtime().world_ptr());
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

// Every per-element state, in memory (streamed ones read whole).
std::vector<zero::FlatRange> states_of(const Engine& engine) {
  const zero::FlatStateView& view = engine.training_state().flat_view();
  int64_t total = 0;
  for (const zero::FlatSlot& slot : view.flat_slots()) total += slot.numel;
  std::vector<zero::FlatRange> out;
  for (const zero::FlatRange& range : view.flat_ranges({0, total}))
    out.push_back({range.name, range.over(range.covers).clone(), range.covers});
  return out;
}
}  // namespace

TEST_CASE("offload cpu and nvme x stages 1-3 x f32/bf16 x accumulation 1/2 equal no offload bit for bit", "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("equivalence");
  const std::string& swap = swap_dir.path;
  for (bool bf16 : {false, true})
    for (int stage : {1, 2, 3})
      for (int gas : {1, 2}) {
        const TrainingRun plain = train_tiny_gpt(config_text(stage, gas, bf16), world, kSteps);
        if (stage == 3) require_stage3_partitioned(*plain.engine);
        for (const std::string& offload : {kCpu, nvme(swap)}) {
          INFO((bf16 ? "bf16" : "f32") << ", stage " << stage << ", gas " << gas << ", " << offload << ", "
                                       << world->size() << " ranks");
          const TrainingRun offloaded = train_tiny_gpt(config_text(stage, gas, bf16, offload), world, kSteps);
          CHECK(shard_of(*offloaded.engine).sub_groups() > 2);  // several sub-groups per shard
          require_identical(plain, offloaded);
          if (stage == 3) require_stage3_partitioned(*offloaded.engine);
        }
      }
  // Stage 3's partial offload: the first half of the sub-groups offloaded, the rest on the device.
  for (const std::string& device : {"cpu", "nvme"}) {
    INFO("ratio 0.5, " << device);
    const std::string partial = R"("sub_group_size": 2000, "offload_optimizer": {"device": ")" + std::string(device) +
                                R"(", "nvme_path": ")" + swap + R"(", "ratio": 0.5})";
    const TrainingRun offloaded = train_tiny_gpt(config_text(3, 2, true, partial), world, kSteps);
    const zero::OptimizerShard& shard = shard_of(*offloaded.engine);
    CHECK(shard.tier_of(0) != zero::OptimizerOffload::Tier::Device);
    CHECK(shard.tier_of(shard.sub_groups() - 1) == zero::OptimizerOffload::Tier::Device);
    require_identical(train_tiny_gpt(config_text(3, 2, true), world, kSteps), offloaded);
    require_stage3_partitioned(*offloaded.engine);
  }
}

TEST_CASE("SGD with momentum and Lion run on the CPU tier too, bit for bit", "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("optimizers");
  for (const std::string& optimizer : {std::string(R"({"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}})"),
                                       std::string(R"({"type": "Lion", "params": {"lr": 1e-4, "weight_decay": 0.1}})")}) {
    INFO(optimizer);
    auto with = [&](const std::string& offload) {
      std::string text = config_text(2, 1, true, offload);
      const size_t at = text.find(R"({"type": "AdamW")");
      return text.replace(at, text.find('}', text.find('}', at) + 1) - at + 1, optimizer);
    };
    const TrainingRun plain = train_tiny_gpt(with(""), world, kSteps);
    require_identical(plain, train_tiny_gpt(with(kCpu), world, kSteps));
    // SGD keeps one state (momentum), Lion one (exp_avg): two tensors per sub-group, six with both pipelines.
    require_identical(plain, train_tiny_gpt(with(nvme(swap_dir.path, 6)), world, kSteps));
  }
}

// Parameter offload (offload_param cpu, stage 3): this rank's parameter shard lives in the host
// tier; the gatherer all-gathers from there. It moves data only.
TEST_CASE("offload_param cpu at stage 3 equals stage 3 without it bit for bit; the shard lives in the host tier",
          "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("parameters");
  Allocator& device = allocator_for(kCPU);
  Allocator& host = offload::host_tier_allocator(false);
  for (bool bf16 : {false, true})
    for (bool checkpointing : {false, true}) {
      INFO((bf16 ? "bf16" : "f32") << ", activation checkpointing " << checkpointing);
      const TrainingRun plain = train_tiny_gpt(config_text(3, 2, bf16), world, kSteps, checkpointing);
      const int64_t device_parameters = bytes(device, MemoryTag::Parameters);
      const int64_t host_parameters = bytes(host, MemoryTag::Parameters);
      const TrainingRun offloaded = train_tiny_gpt(
          config_text(3, 2, bf16, R"("offload_param": {"device": "cpu"}, )" + nvme(swap_dir.path)), world, kSteps,
          checkpointing);
      require_identical(plain, offloaded);
      require_stage3_partitioned(*plain.engine);
      require_stage3_partitioned(*offloaded.engine);
      CHECK(bytes(host, MemoryTag::Parameters) > host_parameters);        // the shard
      CHECK(bytes(device, MemoryTag::Parameters) == device_parameters);  // nothing gathered stays
    }
}

// Parameter offload to nvme (ZeRO-Infinity): each rank's parameter shard lives in swap files, at
// most max_in_cpu elements of it in memory, read ahead in the first step's order. It moves data
// only; the bound holds at every point of every step (the counters' peaks).
TEST_CASE("offload_param nvme equals stage 3 without it bit for bit, within max_in_cpu, with optimizer offload",
          "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("parameters-nvme");
  const std::string& swap = swap_dir.path;
  Allocator& host = offload::host_tier_allocator(false);
  for (bool bf16 : {false, true})
    for (bool checkpointing : {false, true}) {
      const TrainingRun plain = train_tiny_gpt(config_text(3, 2, bf16), world, kSteps, checkpointing);
      require_stage3_partitioned(*plain.engine);
      for (const std::string& optimizer : {std::string(), kCpu, nvme(swap)}) {
        INFO((bf16 ? "bf16" : "f32") << ", activation checkpointing " << checkpointing << ", optimizer "
                                     << (optimizer.empty() ? "on the device" : optimizer));
        const int64_t host_parameters = bytes(host, MemoryTag::Parameters);
        host.stats().reset_peak();
        const std::string offload = nvme_param(swap) + (optimizer.empty() ? "" : ", " + optimizer);
        const TrainingRun offloaded = train_tiny_gpt(config_text(3, 2, bf16, offload), world, kSteps, checkpointing);
        require_identical(plain, offloaded);
        require_stage3_partitioned(*offloaded.engine);
        const zero::SwappedParameters& store = swapped_of(*offloaded.engine);
        CHECK(store.peak_resident_elements() > 0);
        CHECK(store.peak_resident_elements() <= kMaxInCpu);
        const int64_t element_bytes = bf16 ? 2 : 4;
        CHECK(host.stats().snapshot()[MemoryTag::Parameters].peak - host_parameters <=
              (kMaxInCpu + kBufferCount * kBufferSize) * element_bytes);
        const offload::IoEngine::Counters io = store.io_counters().value();
        CHECK(io.bytes_read > 0);
        CHECK(io.bytes_written > 0);
      }
    }
}

TEST_CASE("offload_param nvme reads module k+1 while module k computes, forward and backward", "[offload]") {
  using Event = zero::ParameterGatherer::Event;
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("parameters-prefetch");
  // At most 4000 elements in memory (of the model's 24,060, or a rank's 12,030 at 2 ranks), so the
  // pieces the forward needs are not all still there from the last backward: it must read them.
  const TrainingRun run = train_tiny_gpt(config_text(3, 1, false, nvme_param(swap_dir.path, 4000)), world, 3);
  require_stage3_partitioned(*run.engine);
  const zero::ShardedState* sharded = zero::as_sharded(run.engine->training_state());
  REQUIRE(sharded->gatherer() != nullptr);
  const std::vector<Event>& events = sharded->gatherer()->events();
  bool forward = false, backward = false;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind != Event::ReadIssued) continue;
    const int module = events[i].module;
    // The module running when the read was issued, and whether it ended before `module` started.
    const Event* running = nullptr;
    for (size_t j = i; j-- > 0;)
      if (events[j].kind == Event::ModuleForwardStarted || events[j].kind == Event::ModuleBackwardStarted) {
        running = &events[j];
        break;
      }
    if (running == nullptr || running->module == module) continue;
    for (size_t j = i + 1; j < events.size(); ++j) {
      if (running->kind == Event::ModuleForwardStarted && events[j].kind == Event::ModuleForwardEnded &&
          events[j].module == running->module) {
        for (size_t k = j + 1; k < events.size(); ++k)
          forward = forward || (events[k].kind == Event::ModuleForwardStarted && events[k].module == module);
        break;
      }
      if (running->kind == Event::ModuleBackwardStarted && events[j].kind == Event::ModuleBackwardStarted) {
        backward = backward || events[j].module == module;
        if (events[j].module == module) break;
      }
    }
  }
  CHECK(forward);
  CHECK(backward);
  // The step report says what the step moved: every piece read at least once. The step's last
  // writes may still be in flight when its report is made (they overlap what follows; the report
  // counts completed bytes), so the writes are checked once flushed: each step's whole shard.
  const std::optional<zero::IoTotals> io = run.engine->last_report().io;
  REQUIRE(io.has_value());
  zero::ParameterStore& shard = sharded->flat_parameters().shard();
  CHECK(io->bytes_read >= shard.numel() * 4);
  CHECK(io->bytes_written > 0);
  shard.flush();
  CHECK(shard.io_counters().value().bytes_written >= 3 * shard.numel() * 4);
  CHECK(Engine::format_report(run.engine->last_report(), false).find(" | io read ") != std::string::npos);

  // On the device tier (the gathered parameters), with nothing kept gathered for reuse and no
  // all-gather started ahead (a swapped shard reads ahead instead): at most the largest module
  // (the MLP's 3600-element weight) beside the tied embedding (1830), which backward holds from
  // the LM head until the embedding's gradient completes it.
  const TrainingRun bounded = train_tiny_gpt(
      config_text(3, 1, false, nvme_param(swap_dir.path) + R"(, "stage3_max_reuse_distance": 0)"), world, 3);
  require_stage3_partitioned(*bounded.engine);
  CHECK(bounded.zero3_peak_gathered > 0);
  CHECK(bounded.zero3_peak_gathered <= 3600 + 1830);
}

// Fast init (DeepSpeed's zero.Init): a model built shard by shard under nn::DeferredInit — each
// parameter made only when stage 3 shards it, on every rank from the same seed — trains exactly as
// the same model built whole, with its shard in memory or in swap files; building it holds one
// parameter at a time.
TEST_CASE("a GPT built shard by shard trains as one built whole at stage 3, in memory and on nvme", "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("deferred");
  const std::string& swap = swap_dir.path;
  for (bool bf16 : {false, true})
    for (const std::string& offload : {std::string(), nvme_param(swap) + ", " + nvme(swap)}) {
      INFO((bf16 ? "bf16" : "f32") << (offload.empty() ? ", shard in memory" : ", parameters and optimizer on nvme"));
      const std::string config = config_text(3, 2, bf16, offload);
      const TrainingRun whole = train_tiny_gpt_same_seed(config, world, kSteps, false);
      const TrainingRun deferred = train_tiny_gpt_same_seed(config, world, kSteps, true);
      require_identical(whole, deferred);
      require_stage3_partitioned(*whole.engine);
      require_stage3_partitioned(*deferred.engine);
    }

  Allocator& cpu = allocator_for(kCPU);
  const int64_t before = bytes(cpu, MemoryTag::Parameters);
  cpu.stats().reset_peak();
  std::shared_ptr<models::Decoder> model;
  {
    nn::DeferredInit deferred;
    model = std::make_shared<models::Decoder>(fathom::testing::tiny_gpt_config(), 1000);
  }
  int64_t total = 0, largest = 0;
  for (const auto& [name, parameter] : model->named_parameters()) {
    CHECK(nn::is_deferred(parameter));
    total += parameter.numel();
    largest = std::max(largest, parameter.numel());
  }
  const Initialized init = initialize(Config::from_string(config_text(3, 1, false, nvme_param(swap))), model, nullptr,
                                      nullptr, world);
  // Built and sharded, the CPU tier never held more than a few parameters' worth (one being made,
  // its copy in the model's dtype, a module's default initialisation) — never the whole model.
  const int64_t peak = cpu.stats().snapshot()[MemoryTag::Parameters].peak - before;
  CHECK(peak <= 3 * largest * 4);
  CHECK(peak < total * 4 / 2);
  // From a Hugging Face folder (GPT-2's names and layout): each parameter read from the mapped
  // file when it is sharded; the sharded model holds exactly the file's weights.
  const std::string weights = swap + "/weights";
  models::DecoderConfig gpt2 = fathom::testing::tiny_gpt_config();  // with GPT-2's biases: a GPT2Config
  gpt2.qkv_bias = gpt2.o_bias = gpt2.mlp_bias = gpt2.norm_bias = true;
  const auto source = std::make_shared<models::Decoder>(gpt2, 77);
  if (world->rank() == 0) models::save_hf_model(source->config(), source->state_dict(), weights);
  world->barrier();
  std::shared_ptr<models::Decoder> loaded;
  {
    nn::DeferredInit deferred;
    loaded = std::make_shared<models::Decoder>(gpt2, 1000);
    models::load_hf_weights(*loaded, weights);
  }
  const Initialized from_file = initialize(Config::from_string(config_text(3, 1, false, nvme_param(swap))), loaded,
                                           nullptr, nullptr, world);
  const auto expected = source->named_parameters();
  const nn::NamedTensors actual = from_file.engine->consolidated_state_dict();
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].first);
    CHECK(actual[i].second.to_vector<float>() == expected[i].second.data().to_vector<float>());
  }
  // Below stage 3 a model built shard by shard is refused: stages 1-2 keep full parameters.
  std::shared_ptr<models::Decoder> other;
  {
    nn::DeferredInit deferred;
    other = std::make_shared<models::Decoder>(fathom::testing::tiny_gpt_config(), 1000);
  }
  CHECK_THROWS_WITH(initialize(Config::from_string(config_text(2, 1, false)), other, nullptr, nullptr, world),
                    Catch::Contains("built shard by shard") && Catch::Contains("needs stage 3"));
  // A model that records no way to remake its parameters cannot be built shard by shard.
  auto layers = std::make_shared<nn::ModuleList>();
  {
    nn::DeferredInit deferred;
    layers->push_back(std::make_shared<nn::Linear>(4, 4));
  }
  CHECK_THROWS_WITH(initialize(Config::from_string(config_text(3, 1, false)), layers, nullptr, nullptr, world),
                    Catch::Contains("\"0.weight\" was built under nn::DeferredInit") &&
                        Catch::Contains("recorded no way to regenerate"));
}

TEST_CASE("offload tiers by their tags: cpu leaves the device tier, nvme holds at most buffer_count buffers",
          "[offload]") {
  const auto& world = runtime().world_ptr();
  Allocator& device = allocator_for(kCPU);  // the model's tier on a CPU-only run
  Allocator& host = offload::host_tier_allocator(false);
  for (int stage : {1, 2, 3}) {
    INFO("stage " << stage);
    const int64_t device_masters = bytes(device, MemoryTag::MasterWeights);
    const int64_t device_states = bytes(device, MemoryTag::OptimizerState);
    const TrainingRun run = train_tiny_gpt(config_text(stage, 1, true, kCpu), world, 2);
    if (stage == 3) require_stage3_partitioned(*run.engine);
    CHECK(bytes(device, MemoryTag::MasterWeights) == device_masters);  // none on the device tier
    CHECK(bytes(device, MemoryTag::OptimizerState) == device_states);
    CHECK(bytes(host, MemoryTag::MasterWeights) > 0);
    CHECK(bytes(host, MemoryTag::OptimizerState) > 0);
  }
  // Pinned: the same bytes counted as pinned.
  {
    const TrainingRun run = train_tiny_gpt(
        config_text(2, 1, true, R"("offload_optimizer": {"device": "cpu", "pin_memory": true})"), world, 1);
    CHECK(bytes(offload::host_tier_allocator(true), MemoryTag::OptimizerState) > 0);
  }

  const Scratch swap_dir("memory");
  const std::string& swap = swap_dir.path;
  for (const std::string& pipelines :
       {std::string(R"(, "buffer_count": 3)"),
        std::string(R"(, "buffer_count": 9, "pipeline_read": true, "pipeline_write": true)")}) {
    INFO("nvme" << pipelines);
    const int64_t device_states = bytes(device, MemoryTag::OptimizerState);
    const int64_t host_masters = bytes(host, MemoryTag::MasterWeights);
    const int64_t host_states = bytes(host, MemoryTag::OptimizerState);
    const int64_t host_gradients = bytes(host, MemoryTag::Gradients);
    host.stats().reset_peak();
    const std::string offload = R"("sub_group_size": 2000, "offload_optimizer": {"device": "nvme", "nvme_path": ")" +
                                swap + R"(")" + pipelines + "}";
    const TrainingRun run = train_tiny_gpt(config_text(2, 1, true, offload), world, 3);
    const MemorySnapshot peak = host.stats().snapshot();
    const int64_t buffer_count = pipelines.find("9") != std::string::npos ? 9 : 3;
    // Each buffer: one tensor of the largest sub-group (2000 fp32 elements), page-rounded.
    const int64_t buffer_bytes = 2000 * 4;
    CHECK(peak[MemoryTag::MasterWeights].peak - host_masters + peak[MemoryTag::OptimizerState].peak - host_states <=
          buffer_count * buffer_bytes);
    CHECK(peak[MemoryTag::OptimizerState].peak > host_states);  // it did hold states
    // Between steps nothing of the optimizer side stays in memory.
    CHECK(bytes(host, MemoryTag::MasterWeights) == host_masters);
    CHECK(bytes(host, MemoryTag::OptimizerState) == host_states);
    CHECK(bytes(device, MemoryTag::OptimizerState) == device_states);
    // The gradient went through its own swap files, sub-group by sub-group, and none of it stays.
    CHECK(peak[MemoryTag::Gradients].peak > host_gradients);
    CHECK(bytes(host, MemoryTag::Gradients) == host_gradients);
    const auto io = shard_of(*run.engine).io_counters();
    REQUIRE(io.has_value());
    CHECK(io->bytes_written > 0);
    CHECK(io->bytes_read > 0);
    const zero::IoCounters* counters = run.engine->training_state().io_counters();
    REQUIRE(counters != nullptr);
    CHECK(counters->io_totals().bytes_written > io->bytes_written);  // the gradient's writes besides the optimizer's
  }
}

TEST_CASE("nvme offload checkpoints: saved from the swap files, loaded back into them, resumed like no offload",
          "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("checkpoint");
  const std::string& swap = swap_dir.path;
  const Scratch checkpoint_dir("checkpoint-dir");
  const std::string& checkpoint = checkpoint_dir.path;
  const std::string offloaded = config_text(2, 1, true, nvme(swap));
  Initialized trained = start_tiny_gpt(offloaded, world);
  train_steps(trained, 3);
  trained.engine->save_checkpoint(checkpoint, "three");
  const std::vector<zero::FlatRange> saved = states_of(*trained.engine);

  // Loaded into a fresh offloaded engine: every state equals the saved one (read back from its
  // swap files), and one more step equals the same step resumed without offload.
  Initialized resumed = start_tiny_gpt(offloaded, world);
  resumed.engine->load_checkpoint(checkpoint, "three");
  const std::vector<zero::FlatRange> loaded = states_of(*resumed.engine);
  REQUIRE(loaded.size() == saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    INFO(saved[i].name);
    CHECK(loaded[i].name == saved[i].name);
    CHECK(loaded[i].values.to_vector<float>() == saved[i].values.to_vector<float>());
  }
  Initialized plain = start_tiny_gpt(config_text(2, 1, true), world);
  plain.engine->load_checkpoint(checkpoint, "three");
  std::vector<double> resumed_losses, plain_losses;
  train_steps(resumed, 2, &resumed_losses);
  train_steps(plain, 2, &plain_losses);
  CHECK(resumed_losses == plain_losses);
  const auto a = resumed.engine->consolidated_state_dict(), b = plain.engine->consolidated_state_dict();
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(a[i].second.to(DType::F32).to_vector<float>() == b[i].second.to(DType::F32).to_vector<float>());
}

// ZeRO-Infinity's checkpoints stream: saving reads the swap files a part at a time and loading
// writes them a sub-group at a time, so neither holds the shard's states in memory.
TEST_CASE("offload_param and offload_optimizer nvme checkpoints stream: bounded memory, resumed like no offload",
          "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("infinity-checkpoint");
  const Scratch checkpoint_dir("infinity-checkpoint-dir");
  const std::string& checkpoint = checkpoint_dir.path;
  const std::string offloaded = config_text(3, 1, true, nvme_param(swap_dir.path) + ", " + nvme(swap_dir.path));
  Allocator& host = offload::host_tier_allocator(false);
  const auto peaks = [&] {  // the optimizer side's and the parameters'
    const MemorySnapshot now = host.stats().snapshot();
    return std::pair{now[MemoryTag::MasterWeights].peak + now[MemoryTag::OptimizerState].peak,
                     now[MemoryTag::Parameters].peak};
  };
  // One sub-group's master and two Adam moments: 2000 fp32 elements each, page-rounded.
  const int64_t sub_group_bytes = 3 * 8192;
  Initialized trained = start_tiny_gpt(offloaded, world);
  train_steps(trained, 2);
  require_stage3_partitioned(*trained.engine);
  const std::vector<zero::FlatRange> saved = states_of(*trained.engine);
  const int64_t shard_bytes = static_cast<int64_t>(saved.back().values.numel()) * 4 * 3;
  REQUIRE(shard_bytes > 4 * sub_group_bytes);  // the bound below tells streaming from whole

  host.stats().reset_peak();
  trained.engine->save_checkpoint(checkpoint, "two");
  auto [masters_peak, parameters_peak] = peaks();
  CHECK(masters_peak - bytes(host, MemoryTag::MasterWeights) - bytes(host, MemoryTag::OptimizerState) <=
        sub_group_bytes);
  CHECK(parameters_peak - bytes(host, MemoryTag::Parameters) <= kMaxInCpu * 2);

  // fathom-export of it: one tensor in memory at a time.
  if (world->rank() == 0) {
    int64_t largest = 0, total = 0;
    for (const zero::FlatSlot& slot : trained.engine->training_state().flat_view().flat_slots()) {
      largest = std::max(largest, slot.numel);
      total += slot.numel;
    }
    REQUIRE(total > 3 * largest);  // the bound below tells one tensor from the whole model
    Allocator& cpu = allocator_for(kCPU);
    const int64_t before = cpu.stats().snapshot().total.current;
    cpu.stats().reset_peak();
    const ExportSummary summary = export_checkpoint(checkpoint, "two", checkpoint + "/model.safetensors", DType::F32);
    CHECK(cpu.stats().snapshot().total.peak - before <= largest * 4 + 4096);
    CHECK(summary.source == "master");
    CHECK(summary.parameters == total);
    CHECK(summary.tensors == trained.engine->training_state().flat_view().flat_slots().size());
  }

  Initialized resumed = start_tiny_gpt(offloaded, world);
  host.stats().reset_peak();
  resumed.engine->load_checkpoint(checkpoint, "two");
  std::tie(masters_peak, parameters_peak) = peaks();
  CHECK(masters_peak - bytes(host, MemoryTag::MasterWeights) - bytes(host, MemoryTag::OptimizerState) <=
        sub_group_bytes);
  CHECK(parameters_peak <= kMaxInCpu * 2 + bytes(host, MemoryTag::Parameters));
  const std::vector<zero::FlatRange> loaded = states_of(*resumed.engine);
  REQUIRE(loaded.size() == saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    INFO(saved[i].name);
    CHECK(loaded[i].name == saved[i].name);
    CHECK(loaded[i].values.to(DType::F32).to_vector<float>() == saved[i].values.to(DType::F32).to_vector<float>());
  }
  Initialized plain = start_tiny_gpt(config_text(3, 1, true), world);
  plain.engine->load_checkpoint(checkpoint, "two");
  std::vector<double> resumed_losses, plain_losses, continued_losses;
  train_steps(resumed, 2, &resumed_losses);
  train_steps(plain, 2, &plain_losses);
  train_steps(trained, 2, &continued_losses);
  require_stage3_partitioned(*resumed.engine);
  require_stage3_partitioned(*plain.engine);
  CHECK(resumed_losses == plain_losses);
  CHECK(resumed_losses == continued_losses);

  // An index whose optimizer states are not the optimizer's is refused before a file is read.
  runtime().world().barrier();
  if (world->rank() == 0) {
    const std::string index = checkpoint + "/two/index.json";
    std::ifstream in(index);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const std::string states = R"("states": ["exp_avg", "exp_avg_sq"])";
    REQUIRE(text.find(states) != std::string::npos);
    text.replace(text.find(states), states.size(), R"("states": ["exp_avg"])");
    std::ofstream(index) << text;
  }
  runtime().world().barrier();
  Initialized edited = start_tiny_gpt(offloaded, world);
  CHECK_THROWS_WITH(edited.engine->load_checkpoint(checkpoint, "two"),
                    Catch::Contains("its optimizer states (exp_avg) are not AdamW's (exp_avg, exp_avg_sq)"));
}

TEST_CASE("nvme offload: a damaged swap file and a full disk stop the step with the file named", "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("faults");
  const std::string& swap = swap_dir.path;
  const Scratch checkpoint_dir("faults-checkpoint");
  const std::string& checkpoint = checkpoint_dir.path;
  const std::string offloaded = config_text(1, 1, false, nvme(swap));
  {
    Initialized init = start_tiny_gpt(offloaded, world);
    train_steps(init, 1);
    // Every rank damages one byte of its own first sub-group's state between steps.
    std::string victim;
    for (const auto& entry : fs::recursive_directory_iterator(swap))
      if (entry.path().filename() == "group0.swp" && entry.path().parent_path().filename().string().rfind("optimizer", 0) == 0 &&
          entry.path().string().find("rank" + std::to_string(world->rank()) + "/") != std::string::npos)
        victim = entry.path().string();
    REQUIRE(!victim.empty());
    const int fd = ::open(victim.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const char garbage = 0x5a;
    REQUIRE(::pwrite(fd, &garbage, 1, 4096 + 100) == 1);
    ::close(fd);
    CHECK_THROWS_WITH(train_steps(init, 1), Catch::Contains("corrupt") && Catch::Contains("group0.swp"));
  }
  {
    Initialized init = start_tiny_gpt(offloaded, world);
    train_steps(init, 1);
    init.engine->save_checkpoint(checkpoint, "one");
    offload::set_io_faults({.space_left = 0});
    CHECK_THROWS_WITH(train_steps(init, 1), Catch::Contains("no space left") && Catch::Contains(".swp"));
    offload::set_io_faults({});
  }
  // The last checkpoint is whole: it loads and trains.
  Initialized reloaded = start_tiny_gpt(offloaded, world);
  reloaded.engine->load_checkpoint(checkpoint, "one");
  std::vector<double> losses;
  train_steps(reloaded, 1, &losses);
  CHECK(losses.size() == 1);
}

TEST_CASE("offload_param nvme: a damaged parameter swap file stops the step with the file named", "[offload]") {
  const auto& world = runtime().world_ptr();
  // One rank: the rank that reads a damaged piece stops, while the others wait in that module's
  // all-gather; in a job its error then ends the job (the launcher's tests show that), but a test
  // that catches it would leave them waiting.
  if (world->size() > 1) return;
  const Scratch swap_dir("parameters-faults");
  Initialized init = start_tiny_gpt(config_text(3, 1, true, nvme_param(swap_dir.path)), world);
  train_steps(init, 1);
  require_stage3_partitioned(*init.engine);
  // After the step every piece is in its file only; the first one's is damaged.
  std::string victim;
  for (const auto& entry : fs::recursive_directory_iterator(swap_dir.path))
    if (entry.path().filename() == "group0.swp" && entry.path().string().find("/param") != std::string::npos)
      victim = entry.path().string();
  REQUIRE(!victim.empty());
  const int fd = ::open(victim.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  const char garbage = 0x5a;
  REQUIRE(::pwrite(fd, &garbage, 1, 4096 + 10) == 1);
  ::close(fd);
  CHECK_THROWS_WITH(train_steps(init, 1), Catch::Contains("corrupt") && Catch::Contains(victim));
}

TEST_CASE("offload_param bad input: stage, path, buffer_size and max_in_cpu", "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("parameters-bad-input");
  const std::string& swap = swap_dir.path;
  CHECK_THAT(error_of(config_text(2, 1, false, nvme_param(swap))),
             Catch::Contains("offload_param") && Catch::Contains("stage"));
  CHECK_THAT(error_of(config_text(3, 1, false, nvme_param("/proc/self"))),
             Catch::Contains("offload_param.nvme_path: \"/proc/self\" is not writable"));
  auto with = [&](const std::string& key, int64_t value) {
    std::string text = nvme_param(swap);
    const size_t at = text.find("\"" + key + "\": ") + key.size() + 4;
    return text.replace(at, text.find_first_of(",}", at) - at, std::to_string(value));
  };
  CHECK_THAT(error_of(config_text(3, 1, false, with("buffer_size", 100))),
             Catch::Contains("offload_param.buffer_size: 100 elements cannot hold this rank's part of") &&
                 Catch::Contains("set buffer_size to"));
  CHECK_THAT(error_of(config_text(3, 1, false, with("buffer_count", 0))),
             Catch::Contains("offload_param.buffer_count: must be >= 1, got 0"));
  CHECK_THAT(error_of(config_text(3, 1, false, with("max_in_cpu", 100))),
             Catch::Contains("offload_param.max_in_cpu: 100 elements cannot hold this rank's part of") &&
                 Catch::Contains("set max_in_cpu to"));
  // max_in_cpu that holds each parameter but not a module's together: tests/zero/test_zero.cpp.
  runtime().world().barrier();
  for (const auto& entry : fs::recursive_directory_iterator(swap)) CHECK(entry.path().extension() != ".swp");
}

TEST_CASE("offload bad input: paths, O_DIRECT, buffer_count, stage and ratio", "[offload]") {
  const auto& world = runtime().world_ptr();
  const Scratch swap_dir("bad-input");
  const std::string& swap = swap_dir.path;
  const std::string missing = swap + "/does-not-exist";
  CHECK_THAT(error_of(config_text(2, 1, false, nvme(missing))),
             Catch::Contains("nvme_path: \"" + missing + "\" does not exist"));
  {
    std::ofstream(swap + "/a-file") << "x";
    CHECK_THAT(error_of(config_text(2, 1, false, nvme(swap + "/a-file"))), Catch::Contains("is not a directory"));
  }
  // Not writable: a directory of a read-only file system, which root cannot write either.
  CHECK_THAT(error_of(config_text(2, 1, false, nvme("/proc/self"))),
             Catch::Contains("\"/proc/self\" is not writable") || Catch::Contains("cannot create the swap directory"));
  offload::set_io_faults({.refuse_direct_io = true});
  CHECK_THAT(error_of(config_text(2, 1, false, nvme(swap))), Catch::Contains("O_DIRECT") && Catch::Contains(swap));
  offload::set_io_faults({});
  CHECK_THAT(error_of(config_text(2, 1, false, nvme(swap, 4))),
             Catch::Contains("buffer_count: 4 buffers are too few") && Catch::Contains("needs 9"));
  CHECK_THAT(error_of(config_text(0, 1, false, kCpu)), Catch::Contains("zero_optimization.stage is 0"));
  CHECK_THAT(error_of(config_text(2, 1, false, R"("sub_group_size": 0)")),
             Catch::Contains("zero_optimization.sub_group_size: must be > 0"));
  CHECK_THAT(error_of(config_text(3, 1, false, R"("offload_optimizer": {"device": "cpu", "ratio": 0})")),
             Catch::Contains("offload_optimizer.ratio: must be in (0, 1], got 0"));
  CHECK_THAT(error_of(config_text(2, 1, false, R"("offload_optimizer": {"device": "cpu", "ratio": 0.5})")),
             Catch::Contains("ratio: 0.5 (a partial offload) needs zero_optimization.stage 3"));
  // Nothing is left behind in nvme_path by the engines that failed.
  runtime().world().barrier();
  for (const auto& entry : fs::recursive_directory_iterator(swap)) CHECK(entry.path().extension() != ".swp");
}
