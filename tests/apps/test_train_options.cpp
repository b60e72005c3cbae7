// fathom-train's command line: the device and attention-kernel choices.
#include <catch2/catch.hpp>

#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "apps/train/train_options.h"
#include "test_util.h"

using namespace fathom;
using fathom::apps::parse_train_options;
using fathom::apps::TrainOptions;
using fathom::apps::resolve_device;

namespace {
apps::TrainOptions parse(std::vector<const char*> args) {
  args.insert(args.begin(), "fathom-train");
  return parse_train_options(static_cast<int>(args.size()), args.data());
}
}  // namespace

TEST_CASE("fathom-train --device: auto takes the runtime's device, cpu forces the CPU, cuda needs a GPU", "[launcher]") {
  CHECK(parse({}).device == "auto");
  CHECK(parse({"--device", "cpu"}).device == "cpu");
  CHECK_THROWS_WITH(parse({"--device", "gpu"}), Catch::Contains("\"gpu\" is not a device; use auto, cpu or cuda"));

  CHECK(resolve_device("auto", kCPU) == kCPU);
  CHECK(resolve_device("auto", Device::cuda(1)) == Device::cuda(1));
  CHECK(resolve_device("cpu", Device::cuda(0)) == kCPU);
  CHECK(resolve_device("cuda", Device::cuda(0)) == Device::cuda(0));
  if (cuda::device_count() == 0) CHECK_THROWS_WITH(resolve_device("cuda", kCPU), Catch::Contains("no CUDA device"));
}

TEST_CASE("fathom-train --attention sets the model's attention kernel", "[launcher]") {
  models::GPTConfig config = models::GPTConfig::preset("tiny");
  parse({"--attention", "gemm"}).apply_sizes(config);
  CHECK(config.attention == nn::AttentionKernel::Gemm);
  parse({}).apply_sizes(config);
  CHECK(config.attention == nn::AttentionKernel::Auto);
  CHECK_THROWS_WITH(parse({"--attention", "flash"}),
                    Catch::Contains("--attention: unknown attention kernel \"flash\"; use \"auto\", \"fused\" or \"gemm\""));
}

TEST_CASE("train options: --tag picks the checkpoint to resume from, and needs --resume", "[launcher]") {
  const char* with_tag[] = {"fathom-train", "--resume", "runs/a", "--tag", "global_step100"};
  const TrainOptions o = parse_train_options(5, with_tag);
  CHECK(o.resume_dir == "runs/a");
  CHECK(o.resume_tag == "global_step100");
  const char* alone[] = {"fathom-train", "--tag", "global_step100"};
  CHECK(fathom::testing::error_of([&] { parse_train_options(3, alone); }) ==
        "--tag global_step100 names a checkpoint to resume from; give the folder too: --resume DIR --tag global_step100");
}

TEST_CASE("train options: --deepspeed_config is DeepSpeed's name for --config", "[launcher]") {
  CHECK(parse({"--deepspeed_config", "ds_config.json"}).config_path == "ds_config.json");
  CHECK(parse({"--config", "ds_config.json"}).config_path == "ds_config.json");
}
