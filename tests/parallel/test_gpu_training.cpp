// Training on the GPU computes the CPU's function (label `cuda`; run under mpirun -np 2 by the
// GPU check, both ranks sharing one GPU, so data parallelism goes through the MPI backend's host
// staging — NCCL refuses two ranks on one GPU).
//   - GPT training on the GPU, TF32 off, against the CPU: f32 rel. diff < 1e-4 over 20 steps,
//     bf16 < 1e-2;
//   - ZeRO stages 1-3 at world size 1 on the GPU equal stage 0 on the GPU;
//   - 2-process DP (stage 0) and ZeRO-2 on the GPU equal the 1-process GPU run;
//   - optimizer offload (cpu, nvme) with the model on the GPU equals no offload;
//   - NCCL collectives equal the MPI ones (world size 1: each rank's own NCCL communicator);
//   - runtime.groups() gives device tensors NCCL only when every rank has its own GPU.
#include <filesystem>

#include "core/cuda/cuda_runtime.h"
#include "core/generator.h"
#include "gpt_training.h"
#include "mpi_test_util.h"
#include "parallel/comms_logger.h"
#include "parallel/nccl_communicator.h"
#include "tests/cuda/require_cuda.h"
#include "test_util.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::require_equivalent;
using fathom::testing::runtime;
using fathom::testing::train_tiny_gpt;

namespace {
constexpr int kSteps = 20;

std::string config_text(int stage, bool bf16, int global_batch, const std::string& zero_extra = "") {
  return detail::concat(R"({"train_batch_size": )", global_batch,
                        R"(, "optimizer": {"type": "AdamW", "params": {"lr": 5e-4, "weight_decay": 0.1}},
      "gradient_clipping": 1.0, "seed": 7, "bf16": {"enabled": )", bf16 ? "true" : "false",
                        R"(}, "zero_optimization": {"stage": )", stage, zero_extra, "}}");
}

Device gpu() { return runtime().device().is_cuda() ? runtime().device() : Device::cuda(0); }

// Stage 3 partitions every parameter (the tiny GPT's are all below the default
// stage3_param_persistence_threshold of 1e5, which would keep them whole).
std::string stage3_extra(int stage) { return stage == 3 ? R"(, "stage3_param_persistence_threshold": 0)" : ""; }

// A one-rank group of this process (ZeRO at world size 1 without the other ranks).
std::shared_ptr<parallel::Communicator> self_group() {
  return runtime().world().split(runtime().rank(), 0, "self");
}
}  // namespace

TEST_CASE("GPT training on the GPU matches the CPU (TF32 off)", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  for (bool bf16 : {false, true}) {
    INFO((bf16 ? "bf16" : "f32"));
    const auto cpu = train_tiny_gpt(config_text(0, bf16, 4), nullptr, kSteps);
    const auto device = train_tiny_gpt(config_text(0, bf16, 4), nullptr, kSteps, false, gpu());
    require_equivalent(cpu, device, bf16 ? 1e-2 : 1e-4);
  }
}

TEST_CASE("ZeRO stages 1-3 at world size 1 on the GPU equal stage 0", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const auto alone = train_tiny_gpt(config_text(0, false, 4), nullptr, kSteps, false, gpu());
  for (int stage : {1, 2, 3}) {
    INFO("stage " << stage);
    const auto run =
        train_tiny_gpt(config_text(stage, false, 4, stage3_extra(stage)), self_group(), kSteps, false, gpu());
    require_equivalent(alone, run, 1e-5);
    if (stage == 3) fathom::testing::require_stage3_partitioned(*run.engine);
  }
}

// Offload moves the optimizer to the CPU: the CPU Adam and the CUDA Adam evaluate the same f32
// expressions, but the compilers contract multiply-adds into FMAs differently, so the updates may
// differ in the last bit; the bound is the equivalence bound, not bitwise (on a CPU-only machine
// both sides run the same kernel and tests/zero/test_zero_offload.cpp demands bit equality).
TEST_CASE("optimizer offload to cpu and nvme on a GPU model equals no offload", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const std::string swap = (std::filesystem::current_path() / ("gpu-offload-" + std::to_string(runtime().rank()))).string();
  std::filesystem::create_directories(swap);
  for (bool bf16 : {false, true})
    for (int stage : {2, 3}) {
      const auto plain =
          train_tiny_gpt(config_text(stage, bf16, 4, stage3_extra(stage)), self_group(), kSteps, false, gpu());
      if (stage == 3) fathom::testing::require_stage3_partitioned(*plain.engine);
      for (const std::string& device : {"cpu", "nvme"}) {
        INFO((bf16 ? "bf16" : "f32") << ", stage " << stage << ", offload " << device);
        const std::string offload = stage3_extra(stage) +
                                    R"(, "sub_group_size": 3000, "offload_optimizer": {"device": ")" + device +
                                    R"(", "pin_memory": true, "nvme_path": ")" + swap + R"("})";
        const auto offloaded = train_tiny_gpt(config_text(stage, bf16, 4, offload), self_group(), kSteps, false, gpu());
        require_equivalent(plain, offloaded, bf16 ? 1e-2 : 1e-5);
        if (stage == 3) fathom::testing::require_stage3_partitioned(*offloaded.engine);
      }
    }
  std::filesystem::remove_all(swap);
}

TEST_CASE("data parallel and ZeRO-2 over MPI with host staging equal the one-process GPU run", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const auto& world = runtime().world_ptr();
  const int global_batch = 4 * world->size();
  const auto alone = train_tiny_gpt(config_text(0, false, global_batch), nullptr, kSteps, false, gpu());
  for (int stage : {0, 2}) {
    INFO("stage " << stage << ", " << world->size() << " ranks");
    require_equivalent(alone, train_tiny_gpt(config_text(stage, false, global_batch), world, kSteps, false, gpu()),
                       1e-5);
  }
}

TEST_CASE("NCCL collectives equal the MPI ones", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  REQUIRE(parallel::nccl_available());
  const auto nccl = parallel::make_nccl_communicator(*self_group(), gpu().index, "nccl self");
  const auto mpi = self_group();
  Generator gen(5);
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    INFO(dtype_name(dtype));
    const Tensor host = uniform({1000003}, gen, -1, 1, DType::F64).to(dtype);
    Tensor on_mpi = host.clone();
    mpi->all_reduce(on_mpi, parallel::ReduceOp::Avg);
    Tensor on_nccl = host.to(gpu());
    nccl->all_reduce(on_nccl, parallel::ReduceOp::Avg);
    FATHOM_REQUIRE_CLOSE(on_nccl.to(kCPU), on_mpi, 0.0, 0.0);
    Tensor gathered_mpi = Tensor::empty({host.numel()}, dtype);
    mpi->all_gather(host, gathered_mpi);
    Tensor gathered_nccl = Tensor::empty({host.numel()}, dtype, gpu());
    nccl->all_gather(host.to(gpu()), gathered_nccl);
    FATHOM_REQUIRE_CLOSE(gathered_nccl.to(kCPU), gathered_mpi, 0.0, 0.0);
  }
}

TEST_CASE("NCCL collectives in a group equal the same collectives issued one by one on MPI", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  REQUIRE(parallel::nccl_available());
  const auto nccl = parallel::make_nccl_communicator(*self_group(), gpu().index, "nccl grouped");
  const auto mpi = self_group();
  Generator gen(6);
  std::vector<Tensor> on_mpi, on_nccl;
  std::vector<parallel::WorkHandle> handles;
  {
    parallel::CollectiveGroup group(*nccl);
    for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::F32}) {  // 16-bit: staged in f32
      const Tensor host = uniform({4099}, gen, -1, 1, DType::F64).to(dtype);
      on_mpi.push_back(host.clone());
      mpi->all_reduce(on_mpi.back(), parallel::ReduceOp::Avg);
      on_nccl.push_back(host.to(gpu()));
      handles.push_back(nccl->all_reduce_async(on_nccl.back(), parallel::ReduceOp::Avg));
    }
    REQUIRE_THROWS_WITH(handles.front()->wait(), Catch::Contains("close the group first"));
  }
  for (auto& handle : handles) handle->wait();
  for (size_t k = 0; k < on_mpi.size(); ++k) FATHOM_REQUIRE_CLOSE(on_nccl[k].to(kCPU), on_mpi[k], 0.0, 0.0);
}

TEST_CASE("the process groups put device tensors on NCCL exactly when every rank has its own GPU", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const parallel::ProcessGroups groups = runtime().groups();
  const bool own_gpu = runtime().nccl_world() != nullptr;
  CHECK(groups.has_device_groups() == own_gpu);
  const std::string device_backend = groups.for_device(parallel::Axis::Data, gpu())->backend();
  CHECK(device_backend == (own_gpu ? "nccl" : "mpi"));  // ranks sharing a GPU: MPI's host staging
  CHECK(std::string(groups.for_device(parallel::Axis::Data, kCPU)->backend()) == "mpi");
}

TEST_CASE("the comms logger sees NCCL collectives with their message sizes", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  REQUIRE(parallel::nccl_available());
  const auto nccl = parallel::make_nccl_communicator(*self_group(), gpu().index, "nccl logged");
  auto logger = std::make_shared<parallel::CommsLogger>(parallel::CommsLoggerOptions{});
  {
    parallel::CollectiveObservation watching(logger);
    Tensor t = Tensor::zeros({1 << 20}, DType::F32, gpu());
    nccl->all_reduce(t);
    parallel::WorkHandle work = nccl->all_reduce_async(t);
    work->wait();
  }
  const std::vector<parallel::CommsRow> rows = logger->rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].op == "all_reduce");
  CHECK(rows[0].group == "nccl logged");
  CHECK(rows[0].bytes == 4 << 20);
  CHECK(rows[0].count == 2);
  CHECK(rows[0].total_ms > 0);
}
