// fathom-estimate-memory: per-rank model-state memory (parameters, gradients, fp32 masters,
// optimizer states) for each ZeRO stage and data-parallel world size — Fathom's counterpart of
// DeepSpeed's estimate_zero2/3_model_states_mem_needs_all_cold (docs/zero_memory.md).
//
//   fathom-estimate-memory --preset gpt2-124M --world-sizes 1,4
//   fathom-estimate-memory --model path/to/Llama-3.2-1B --world-size 8   (a Hugging Face folder)
//   fathom-estimate-memory --params 7B --world-size 8 --precision bf16 --optimizer AdamW --offload
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/model_spec.h"
#include "zero/memory_estimate.h"

using namespace fathom;

namespace {

const char* kUsage = R"(usage: fathom-estimate-memory (--params COUNT | [--arch A] --preset NAME | --model DIR) [options]

  --params COUNT        parameter count; K, M, B and T suffixes accepted (124M, 1.5B, 7B)
  --preset NAME         a preset of --arch (gpt2: gpt2-124M, small or tiny; llama, qwen2,
                        mistral: small or tiny), counting its parameters
  --arch A              gpt2 (default), llama, qwen2 or mistral
  --model DIR           a Hugging Face model folder: the parameters its config.json describes
  --world-size N        data-parallel ranks (default: --world-sizes 1,2,4,8)
  --world-sizes LIST    comma-separated world sizes, one table each
  --precision P         bf16 or fp16 (mixed precision, fp32 masters) or f32 (default bf16)
  --optimizer NAME      Adam, AdamW, Lamb, SGD, SGD-momentum, Lion, OneBitAdam, ZeroOneAdam or
                        OneBitLamb (default AdamW)
  --stage N             only this ZeRO stage (default: 0-3)
  --offload             optimizer (fp32 masters + states) in host memory; stages 1-3

Bytes are per rank. A sharded buffer is padded so every rank holds ceil(params / N) elements.
)";

struct Options {
  int64_t parameters = 0;
  std::string preset, arch = "gpt2", model_dir;
  std::vector<int> world_sizes = {1, 2, 4, 8};
  DType dtype = DType::BF16;
  zero::OptimizerKind optimizer = zero::OptimizerKind::AdamW;
  int stage = -1;  // all
  bool offload = false;
};

// "124439808", "124M", "1.5B": digits, an optional fraction, an optional K/M/B/T suffix, and a
// whole number of parameters in the end.
int64_t parse_count(const std::string& text) {
  const std::string bad = "--params \"" + text + "\": expected a positive count such as 124439808, 124M or 1.5B";
  int64_t digits = 0, scale = 1, multiplier = 1;
  size_t i = 0;
  bool fraction = false, any_digit = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      FATHOM_CHECK(digits < INT64_MAX / 100, bad);
      digits = digits * 10 + (c - '0');
      if (fraction) scale *= 10;
      any_digit = true;
    } else if (c == '.' && !fraction) {
      fraction = true;
    } else {
      break;
    }
  }
  if (i + 1 == text.size()) {
    switch (text[i]) {
      case 'K': case 'k': multiplier = 1000; break;
      case 'M': case 'm': multiplier = 1000000; break;
      case 'B': case 'b': case 'G': case 'g': multiplier = 1000000000; break;
      case 'T': case 't': multiplier = 1000000000000; break;
      default: FATHOM_FAIL(bad);
    }
  } else {
    FATHOM_CHECK(i == text.size(), bad);
  }
  FATHOM_CHECK(any_digit && digits > 0 && digits <= INT64_MAX / multiplier, bad);
  FATHOM_CHECK(digits * multiplier % scale == 0, bad, " (not a whole number of parameters)");
  return digits * multiplier / scale;
}

int parse_positive_int(const std::string& flag, const std::string& text) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  FATHOM_CHECK(used == text.size() && value > 0, flag, " \"", text, "\": expected a positive integer");
  return value;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (flag == "--offload") {
      o.offload = true;
      continue;
    }
    FATHOM_CHECK(i + 1 < argc, flag, ": missing value; see fathom-estimate-memory --help");
    const std::string value = argv[++i];
    if (flag == "--params") {
      o.parameters = parse_count(value);
    } else if (flag == "--preset") {
      o.preset = value;
    } else if (flag == "--arch") {
      o.arch = value;
    } else if (flag == "--model") {
      o.model_dir = value;
    } else if (flag == "--world-size") {
      o.world_sizes = {parse_positive_int(flag, value)};
    } else if (flag == "--world-sizes") {
      o.world_sizes.clear();
      size_t start = 0;
      while (true) {
        const size_t comma = value.find(',', start);
        o.world_sizes.push_back(parse_positive_int(flag, value.substr(start, comma - start)));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (flag == "--precision") {
      if (value == "bf16" || value == "bfloat16") o.dtype = DType::BF16;
      else if (value == "fp16" || value == "f16" || value == "float16") o.dtype = DType::F16;
      else if (value == "f32" || value == "fp32" || value == "float32") o.dtype = DType::F32;
      else FATHOM_FAIL("--precision \"", value, "\": use bf16, fp16 or f32");
    } else if (flag == "--optimizer") {
      o.optimizer = zero::parse_optimizer_kind(value);
    } else if (flag == "--stage") {
      FATHOM_CHECK(value.size() == 1 && value[0] >= '0' && value[0] <= '3', "--stage \"", value,
                   "\": use 0, 1, 2 or 3");
      o.stage = value[0] - '0';
    } else {
      FATHOM_FAIL("unknown option ", flag, "; see fathom-estimate-memory --help");
    }
  }
  FATHOM_CHECK((o.parameters > 0) + !o.preset.empty() + !o.model_dir.empty() == 1,
               "give one of --params, --preset or --model; see fathom-estimate-memory --help");
  FATHOM_CHECK(!(o.offload && o.stage == 0), "--offload needs ZeRO stage 1, 2 or 3 (as in DeepSpeed)");
  return o;
}

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

void print_table(const Options& o, int world_size) {
  std::printf("\nworld size %d\n", world_size);
  std::printf("stage  params GiB  grads GiB  masters GiB  optim GiB  total GiB  total bytes");
  std::printf(o.offload ? "  device GiB  host GiB  device bytes  host bytes\n" : "\n");
  for (int stage = 0; stage <= 3; ++stage) {
    if ((o.stage >= 0 && stage != o.stage) || (o.offload && stage == 0)) continue;
    const zero::ModelStateEstimate e = zero::estimate_model_states(
        {o.parameters, world_size, o.dtype, stage, o.optimizer, o.offload});
    std::printf("%5d  %10.2f  %9.2f  %11.2f  %9.2f  %9.2f  %11" PRId64, stage, gib(e.parameters), gib(e.gradients),
                gib(e.master_weights), gib(e.optimizer_states), gib(e.total), e.total);
    if (o.offload)
      std::printf("  %10.2f  %8.2f  %12" PRId64 "  %10" PRId64, gib(e.device), gib(e.host), e.device, e.host);
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o = parse(argc, argv);
    std::string described;
    if (!o.preset.empty() || !o.model_dir.empty()) {
      const models::ModelSpec spec =
          o.model_dir.empty() ? models::ModelSpec::preset(o.arch, o.preset) : models::ModelSpec::from_folder(o.model_dir);
      o.parameters = spec.parameter_count();
      described = " (" + (o.model_dir.empty() ? "preset " + o.preset : o.model_dir) + "; " + spec.describe() + ")";
    }
    const bool mixed = o.dtype != DType::F32;
    std::printf("Per-rank model states for %" PRId64 " parameters%s\n", o.parameters, described.c_str());
    std::printf("%s, %s (%" PRId64 " bytes of optimizer state per parameter)%s\n",
                mixed ? (std::string(dtype_name(o.dtype)) + " mixed precision with fp32 masters").c_str()
                      : "f32 (no master copy)",
                zero::optimizer_kind_name(o.optimizer), zero::optimizer_state_bytes(o.optimizer),
                o.offload ? "; masters and optimizer states offloaded to host memory" : "");
    std::printf("Sharded buffers are padded: a rank holds ceil(params / N) elements.\n");
    if (mixed && o.stage <= 0 && !o.offload)
      std::printf("Stage 0 accumulates gradients in fp32 beside the masters (4 bytes, not 2).\n");
    for (int world_size : o.world_sizes) print_table(o, world_size);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "fathom-estimate-memory: %s\n", e.message().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fathom-estimate-memory: %s\n", e.what());
    return 2;
  }
}
