// fathom-export: consolidated weights from any Fathom checkpoint as one safetensors file
// (engine/checkpoint/export.h), like DeepSpeed's zero_to_fp32.py but with no model code and no
// conversion step. A checkpoint of fathom-train becomes what fathom-train writes: with --out a
// folder, a Hugging Face model folder (the model's config.json and safetensors shards, which
// transformers' from_pretrained and fathom-generate load); GPT-2's weights in its Conv1D layout.
//
//   fathom-export runs/a/checkpoints --out exported/ [--tag global_step200] [--dtype bf16]
//   fathom-export runs/a/checkpoints --out model.safetensors
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "core/error.h"
#include "engine/checkpoint/export.h"
#include "apps/train/train_export.h"

using namespace fathom;

namespace {
const char* kUsage = R"(usage: fathom-export DIR --out FOLDER|FILE.safetensors [--tag TAG] [--dtype f32|bf16|f16]

Writes the weights of a Fathom checkpoint (any world size, tensor-parallel size or ZeRO stage) as
one safetensors file; for a checkpoint of fathom-train and an --out that is not a .safetensors
file, as a Hugging Face model folder (config.json and safetensors shards). The fp32 master weights are used when the checkpoint has them (mixed precision),
otherwise the saved parameters. --dtype: f32 (default), bf16 or f16. TAG: default `latest`.
)";

int run(int argc, char** argv) {
  std::string dir, out, tag;
  DType dtype = DType::F32;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (arg.rfind("--", 0) != 0) {
      FATHOM_CHECK(dir.empty(), "more than one checkpoint folder given (", dir, ", ", arg, ")");
      dir = arg;
      continue;
    }
    FATHOM_CHECK(i + 1 < argc, arg, ": missing value; see fathom-export --help");
    const std::string value = argv[++i];
    if (arg == "--out") out = value;
    else if (arg == "--tag") tag = value;
    else if (arg == "--dtype") dtype = parse_dtype(value);
    else FATHOM_FAIL("unknown option ", arg, "; see fathom-export --help");
  }
  FATHOM_CHECK(!dir.empty() && !out.empty(), "give a checkpoint folder and --out FILE; see fathom-export --help");
  FATHOM_CHECK(is_floating_point(dtype), "--dtype must be f32, bf16 or f16");

  const apps::ResumePoint point = apps::open_resume_point(dir, tag);
  const ExportSummary done = point.run ? apps::export_train_run(point, out, dtype) : export_checkpoint(dir, tag, out, dtype);
  // The layout: data x tensor ranks, then "x N stages" for a pipeline.
  const std::string stages =
      done.pipeline_parallel_size > 1 ? " x " + std::to_string(done.pipeline_parallel_size) + " stages" : "";
  std::printf("fathom-export: %s/%s (%d x %d ranks%s, ZeRO stage %d, %s) -> %s: %zu tensors, %lld parameters, %s\n",
              point.dir.c_str(), done.tag.c_str(), done.world_size, done.tensor_parallel_size, stages.c_str(),
              done.zero_stage, done.source.c_str(), out.c_str(), done.tensors, static_cast<long long>(done.parameters),
              dtype_name(dtype));
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "fathom-export: %s\n", e.message().c_str());
    return 1;
  }
}
