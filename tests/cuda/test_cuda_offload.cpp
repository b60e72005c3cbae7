// Optimizer offload with the model on the GPU (the GPU check's offload row; under emulation in
// CI): ZeRO stage 2 and 3 with offload_optimizer cpu and nvme (pinned host memory) take the steps
// that no offload takes on the GPU. The reduced gradients travel to the host and the updated
// parameters back on the transfer stream (offload/device_transfers.h); the CPU Adam and the CUDA
// Adam evaluate the same f32 expressions, differing at most by FMA contraction, so the bound is
// the f32 equivalence bound rather than bit equality (which the CPU-only tests demand).
#include <unistd.h>

#include <filesystem>

#include "engine/initialize.h"
#include "models/decoder.h"
#include "offload/device_transfers.h"
#include "offload/host_memory.h"
#include "parallel/local_communicator.h"
#include "require_cuda.h"
#include "test_util.h"
#include "zero/sharded_state.h"
#include "zero_partitioning.h"

using namespace fathom;

namespace {

struct Run {
  std::vector<double> losses;
  nn::NamedTensors weights;
  int64_t transfers = 0;
};

Run train(int stage, const std::string& offload) {
  const Device gpu = Device::cuda(0);
  models::DecoderConfig config = models::DecoderConfig::gpt2(/*n_layer=*/2, /*n_head=*/2, /*width=*/16,
                                                             /*vocab_size=*/64, /*positions=*/8);
  // No biases: the attention key bias's gradient is rounding noise (exactly zero in exact
  // arithmetic), which Adam scales into full steps, so two Adam kernels that round differently
  // would move it differently.
  config.qkv_bias = config.o_bias = config.mlp_bias = config.norm_bias = false;
  auto gpt = std::make_shared<models::Decoder>(config, /*seed=*/5);
  gpt->to(gpu);
  const auto groups = parallel::ProcessGroups::data_parallel(std::make_shared<parallel::LocalCommunicator>());
  const std::string json = R"({"train_batch_size": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
      "zero_optimization": {"stage": )" + std::to_string(stage) +
                           R"(, "stage3_param_persistence_threshold": 0, "reduce_bucket_size": 2000,
      "sub_group_size": 3000)" + offload + "}}";
  Initialized init = initialize(Config::from_string(json), gpt, nullptr, nullptr, groups);
  Run run;
  for (int step = 0; step < 3; ++step) {
    const StepReport& report = init.engine->train_batch([&] {
      std::vector<int64_t> ids(2 * 8), next(2 * 8), rows{2 * step, 2 * step + 1};
      for (int64_t i = 0; i < 16; ++i) ids[i] = (i * 37 + step) % 64, next[i] = (i * 53 + 2) % 64;
      return Batch{Tensor::from_vector(ids, {2, 8}), Tensor::from_vector(next, {2, 8}), Tensor::from_vector(rows, {2})};
    });
    run.losses.push_back(report.loss);
  }
  if (stage == 3) fathom::testing::require_stage3_partitioned(*init.engine);
  run.weights = init.engine->consolidated_state_dict();
  const auto& shard = zero::as_sharded(init.engine->training_state())->optimizer_shard();
  if (shard.transfers()) run.transfers = shard.transfers()->copies();
  return run;
}

}  // namespace

TEST_CASE("optimizer offload with the model on the GPU trains as without offload, cpu and nvme", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  // Per process: CTest runs the emulated binary under two thread orders at once.
  const std::string swap =
      (std::filesystem::current_path() / ("cuda-offload-test-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(swap);
  for (int stage : {2, 3}) {
    const Run expected = train(stage, "");
    for (const std::string device : {"cpu", "nvme"}) {
      INFO("stage " << stage << ", offload " << device);
      Allocator& pinned = offload::host_tier_allocator(true);
      pinned.stats().reset_peak();
      const int64_t pinned_before = pinned.stats().snapshot().total.current;
      const Run run = train(stage, R"(, "offload_optimizer": {"device": ")" + device +
                                       R"(", "pin_memory": true, "nvme_path": ")" + swap + R"("})");
      CHECK(run.transfers > 0);  // gradients down and parameters up on the transfer stream
      CHECK(pinned.stats().snapshot().total.peak > pinned_before);  // the states lived in pinned memory
      for (size_t s = 0; s < run.losses.size(); ++s)
        CHECK(std::fabs(run.losses[s] - expected.losses[s]) <= 1e-5 * std::fabs(expected.losses[s]));
      REQUIRE(run.weights.size() == expected.weights.size());
      for (size_t i = 0; i < run.weights.size(); ++i) {
        INFO(run.weights[i].first);
        FATHOM_REQUIRE_CLOSE(run.weights[i].second, expected.weights[i].second, 1e-5, 1e-5);
      }
    }
  }
  std::filesystem::remove_all(swap);
}

// Parameter offload with the model on the GPU (stage 3): the shard lives in pinned host memory or
// in swap files, and each piece is copied to the device before its all-gather
// (zero/staged_parameters.h). The optimizer stays on the GPU, so nothing but placement differs:
// the same values bit for bit.
TEST_CASE("parameter offload with the model on the GPU trains as stage 3 without it, cpu and nvme", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const std::string swap =
      (std::filesystem::current_path() / ("cuda-param-offload-test-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(swap);
  const Run expected = train(3, "");
  for (const std::string device : {"cpu", "nvme"}) {
    INFO("offload_param " << device);
    Allocator& pinned = offload::host_tier_allocator(true);
    pinned.stats().reset_peak();
    const int64_t pinned_parameters = pinned.stats().snapshot()[MemoryTag::Parameters].current;
    const Run run = train(3, R"(, "offload_param": {"device": ")" + device + R"(", "pin_memory": true, "nvme_path": ")" +
                                 swap + R"(", "buffer_count": 3, "buffer_size": 2000, "max_in_cpu": 3000})");
    CHECK(pinned.stats().snapshot()[MemoryTag::Parameters].peak > pinned_parameters);  // the shard was on the host
    CHECK(run.losses == expected.losses);
    REQUIRE(run.weights.size() == expected.weights.size());
    for (size_t i = 0; i < run.weights.size(); ++i) {
      INFO(run.weights[i].first);
      CHECK(run.weights[i].second.to_vector<float>() == expected.weights[i].second.to_vector<float>());
    }
  }
  std::filesystem::remove_all(swap);
}
