// fathom-export: consolidated weights from any Fathom checkpoint as one safetensors file
// (engine/checkpoint/export.h), like DeepSpeed's zero_to_fp32.py but with no model code and no
// conversion step; a checkpoint of fathom-train's GPT becomes the file fathom-train writes (GPT-2's
// names, Conv1D layout and metadata), which transformers and fathom-generate load.
//
//   fathom-export runs/a/checkpoints --out model.safetensors [--tag global_step200] [--dtype bf16]
#include <cstdio>
#include <iostream>
#include <string>

#include "core/error.h"
#include "engine/checkpoint/export.h"
#include "apps/train/train_resume.h"
#include "models/gpt_weights.h"

using namespace fathom;

namespace {
const char* kUsage = R"(usage: fathom-export DIR --out FILE [--tag TAG] [--dtype f32|bf16|f16]

Writes the weights of a Fathom checkpoint (any world size, tensor-parallel size or ZeRO stage) as
one safetensors file. The fp32 master weights are used when the checkpoint has them (mixed precision),
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

  // A checkpoint fathom-train wrote is a GPT: the file is the one fathom-train writes (GPT-2's
  // Conv1D layout and metadata), so transformers and fathom-generate load it.
  const apps::ResumePoint point = apps::open_resume_point(dir, tag);
  ExportLayout layout;
  if (point.run) {
    layout.transposed = models::is_gpt2_conv1d_weight;
    layout.metadata = models::gpt2_safetensors_metadata(point.run->model);
  }
  const ExportSummary done = export_checkpoint(dir, tag, out, dtype, layout);
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
