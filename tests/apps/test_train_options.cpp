// fathom-train's command line: the device and attention-kernel choices, the model flags, and the
// refusal of a checkpoint of the model before the one decoder.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "apps/train/train_options.h"
#include "apps/train/train_export.h"
#include "apps/train/train_resume.h"
#include "engine/initialize.h"
#include "models/decoder.h"
#include "models/gpt.h"
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
  models::ModelSpec spec = models::ModelSpec::preset("gpt2", "tiny");
  parse({"--attention", "gemm"}).apply_sizes(spec);
  CHECK(spec.decoder.attention == nn::AttentionKernel::Gemm);
  parse({}).apply_sizes(spec);
  CHECK(spec.decoder.attention == nn::AttentionKernel::Auto);
  CHECK_THROWS_WITH(parse({"--attention", "flash"}),
                    Catch::Contains("--attention: unknown attention kernel \"flash\"; use \"auto\", \"fused\" or \"gemm\""));
}

TEST_CASE("fathom-train --arch, --preset, --model and the size flags describe the model", "[launcher]") {
  const models::ModelSpec llama = parse({"--arch", "llama", "--preset", "tiny", "--n-layer", "3"}).model_spec();
  CHECK(llama.architecture() == "llama");
  CHECK(llama.decoder.n_layer == 3);
  CHECK(llama.decoder.n_kv_head == 2);
  const models::ModelSpec mha = parse({"--arch", "qwen2", "--preset", "tiny", "--n-head", "2", "--n-embd", "32"}).model_spec();
  CHECK((mha.decoder.n_head == 2 && mha.decoder.n_kv_head == 2 && mha.decoder.qkv_bias));
  CHECK(mha.decoder.intermediate_size == 96);  // Llama's ~8/3 x width, a multiple of 16
  CHECK(parse({"--arch", "mistral", "--n-kv-head", "1"}).model_spec().decoder.n_kv_head == 1);
  CHECK(parse({"--arch", "llama", "--block-size", "64"}).sequence_length(llama) == 64);
  CHECK(parse({}).sequence_length(llama) == 128);  // the model's positions, up to 1024
  CHECK_THROWS_WITH(parse({"--arch", "falcon"}), Catch::Contains("architecture \"falcon\" is not known; use gpt2, llama"));
  CHECK_THROWS_WITH(parse({"--arch", "llama", "--preset", "gpt2-124M"}),
                    Catch::Contains("unknown llama preset \"gpt2-124M\"; use tiny, small, 100M or 350M"));
  CHECK_THROWS_WITH(parse({"--model", "m", "--n-layer", "2"}),
                    Catch::Contains("--model m brings its own architecture, sizes and weights; drop --arch"));
  CHECK_THROWS_WITH(parse({"--arch", "llama", "--init", "w.safetensors"}),
                    Catch::Contains("--init reads GPT-2-layout weights; for llama give a Hugging Face model folder"));
  CHECK_THROWS_WITH(parse({"--n-kv-head", "1"}), Catch::Contains("--n-kv-head needs a grouped-query architecture"));
  CHECK_THROWS_WITH(parse({"--arch", "llama", "--block-size", "500"}).sequence_length(llama),
                    Catch::Contains("--block-size 500 is longer than the model's 128 positions"));
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

TEST_CASE("a GPT-2 checkpoint of the model before the one decoder is recognised and refused by --resume, with the "
          "way on",
          "[launcher]") {
  // What fathom-train wrote before GPT-2 ran on the decoder: models::GPT's parameter names.
  const std::string dir = (std::filesystem::temp_directory_path() / ("fathom_legacy_gpt2_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  models::GPTConfig config = models::GPTConfig::preset("tiny");
  const auto legacy = std::make_shared<models::GPT>(config, 1);
  const Config ds = Config::from_string(R"({"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})");
  apps::TrainRun run;
  run.preset = "tiny";
  run.model = models::ModelSpec::preset("gpt2", "tiny");
  run.sequence_length = 64;
  initialize(ds, legacy).engine->save_checkpoint(dir, "", apps::train_run_client_state(run));

  const apps::ResumePoint point = apps::open_resume_point(dir, "");
  CHECK(point.legacy_gpt2());
  CHECK_THROWS_WITH(apps::resumed_options(parse({}), point, nullptr),
                    Catch::Contains("holds a GPT-2 in the layout of Fathom before its one decoder") &&
                        Catch::Contains("fathom-export " + point.dir + " --out FOLDER") &&
                        Catch::Contains("fathom-train --model FOLDER"));
  // fathom-export still converts it: a GPT-2 folder that gives the old model's logits.
  const std::string exported = dir + "_exported";
  apps::export_train_run(point, exported, DType::F32);
  const models::ModelSpec spec = models::ModelSpec::from_folder(exported);
  const auto decoder = std::static_pointer_cast<models::Decoder>(spec.build(3));
  spec.load(*decoder, exported);
  const Tensor ids = Tensor::from_vector<int64_t>({1, 5, 9, 200, 3, 17}, {1, 6});
  CHECK(fathom::testing::mismatch((*decoder)(autograd::Variable(ids)).data(), (*legacy)(autograd::Variable(ids)).data(),
                                  1e-5, 1e-5) == "");
  std::filesystem::remove_all(exported);
  // A checkpoint of the decoder is not taken for one.
  const std::string current = dir + "_decoder";
  std::filesystem::remove_all(current);
  initialize(ds, run.model.build(1)).engine->save_checkpoint(current, "", apps::train_run_client_state(run));
  CHECK_FALSE(apps::open_resume_point(current, "").legacy_gpt2());
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(current);
}
