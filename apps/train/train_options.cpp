#include "apps/train/train_options.h"

#include <charconv>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"
#include "launcher/text_parsing.h"

namespace fathom::apps {

using launcher::parse_flag_integer;  // the launcher's flag parsing, shared by every program

void TrainOptions::apply_sizes(models::GPTConfig& config) const {
  if (n_layer) config.n_layer = n_layer;
  if (n_head) config.n_head = n_head;
  if (n_embd) config.n_embd = n_embd;
  if (block_size) config.block_size = block_size;
  if (vocab_size) config.vocab_size = vocab_size;
  config.attention = attention;
  config.validate();
}

std::string device_option(const std::string& value) {
  FATHOM_CHECK(value == "auto" || value == "cpu" || value == "cuda", "--device: \"", value,
               "\" is not a device; use auto, cpu or cuda");
  return value;
}

Device resolve_device(const std::string& option, Device runtime_device) {
  if (option == "cpu") return kCPU;
  if (option == "cuda" && !runtime_device.is_cuda()) cuda::require_device(0);  // throws with the reason
  return runtime_device;
}

DataFormat parse_data_format(const std::string& value) {
  if (value == "auto") return DataFormat::Auto;
  if (value == "text") return DataFormat::Text;
  if (value == "tokens") return DataFormat::Tokens;
  FATHOM_FAIL("--data-format: \"", value, "\" is not a format; use auto, text or tokens");
}

TrainOptions parse_train_options(int argc, const char* const* argv) {
  TrainOptions o;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "-h" || flag == "--help") {
      o.help = true;
      continue;
    }
    if (flag == "--allow-non-finite") {
      o.allow_non_finite = true;
      continue;
    }
    if (flag == "--overwrite") {
      o.overwrite = true;
      continue;
    }
    FATHOM_CHECK(flag.rfind("--", 0) == 0, "unexpected argument \"", flag, "\"; see fathom-train --help");
    FATHOM_CHECK(i + 1 < args.size(), flag, ": missing value; see fathom-train --help");
    const std::string& value = args[++i];
    if (flag == "--config" || flag == "--deepspeed_config") o.config_path = value;  // DeepSpeed's flag too
    else if (flag == "--data") o.data_path = value;
    else if (flag == "--val-data") o.val_data_path = value;
    else if (flag == "--data-format") o.data_format = parse_data_format(value);
    else if (flag == "--preset") o.preset = value, o.preset_given = true;
    else if (flag == "--init") o.init_path = value;
    else if (flag == "--out") o.out_dir = value;
    else if (flag == "--steps") o.steps = parse_flag_integer(flag, value, 1), o.steps_given = true;
    else if (flag == "--seed") o.seed = static_cast<uint64_t>(parse_flag_integer(flag, value, 0));
    else if (flag == "--threads") o.threads = static_cast<int>(parse_flag_integer(flag, value, 1));
    else if (flag == "--eval-interval") o.eval_interval = parse_flag_integer(flag, value, 0);
    else if (flag == "--eval-batches") o.eval_batches = static_cast<int>(parse_flag_integer(flag, value, 1));
    else if (flag == "--resume") o.resume_dir = value;
    else if (flag == "--tag") o.resume_tag = value;
    else if (flag == "--save-every") o.save_every = parse_flag_integer(flag, value, 0), o.save_every_given = true;
    else if (flag == "--device") o.device = device_option(value);
    else if (flag == "--attention") o.attention = nn::parse_attention_kernel(value, "--attention");
    else if (flag == "--n-layer") o.n_layer = parse_flag_integer(flag, value, 1);
    else if (flag == "--n-head") o.n_head = parse_flag_integer(flag, value, 1);
    else if (flag == "--n-embd") o.n_embd = parse_flag_integer(flag, value, 1);
    else if (flag == "--block-size") o.block_size = parse_flag_integer(flag, value, 1);
    else if (flag == "--vocab-size") o.vocab_size = parse_flag_integer(flag, value, 1);
    else FATHOM_FAIL("unknown option ", flag, "; see fathom-train --help");
  }
  models::GPTConfig::preset(o.preset);  // validates the name
  FATHOM_CHECK(o.val_data_path.empty() || !o.data_path.empty(), "--val-data ", o.val_data_path,
               " needs a --data file to validate against (the built-in corpus holds out its last 5%)");
  FATHOM_CHECK(o.resume_tag.empty() || !o.resume_dir.empty(), "--tag ", o.resume_tag,
               " names a checkpoint to resume from; give the folder too: --resume DIR --tag ", o.resume_tag);
  return o;
}

std::string train_usage() {
  return R"(usage: fathom-train [options]

Trains a GPT. With no options: a small byte-level GPT on the built-in corpus (Fathom's own docs
and sources), 300 steps, output in runs/latest.

  --config FILE        DeepSpeed-style JSON or YAML config (default: built-in AdamW + cosine);
                       --deepspeed_config FILE is the same (DeepSpeed's flag)
  --data FILE          training data: a token file (nanoGPT raw uint16 or llm.c; GPT-2's
                       vocabulary unless --vocab-size) or a text file read as bytes (default:
                       the built-in corpus)
  --data-format F      auto (default: tokens for a .bin or llm.c file, text for a file without
                       NUL bytes), text or tokens
  --val-data FILE      validation data (default: val.bin beside a train.bin, else the last 5%)
  --preset NAME        tiny, small or gpt2-124M (default small)
  --n-layer N --n-head N --n-embd N --block-size N --vocab-size N
                       override the preset's sizes (byte-level data sets vocab 256)
  --init FILE          start from GPT-2-layout .safetensors weights (e.g. GPT-2's own)
  --steps N            optimizer steps (default 300)
  --out DIR            where model.safetensors and config.json go (default runs/latest)
  --overwrite          replace the checkpoints another run left in --out (default: refuse)
  --seed N             seed for initialisation, data order and dropout
  --threads N          CPU threads (default: the affinity rule, see docs/core.md)
  --eval-interval N    validation loss every N steps (default 50; 0: only at the end)
  --eval-batches N     validation samples per evaluation, in global batches (default 8: the
                       first 8 x train_batch_size samples, the same at every layout)
  --save-every N       save a checkpoint to <out>/checkpoints every N steps and at the end
  --resume DIR         continue from the latest checkpoint in DIR: a checkpoint folder, or the --out
                       folder of an earlier run, at any world size; the model, data, --steps and
                       config come from the checkpoint unless given
  --tag TAG            with --resume: that checkpoint (e.g. global_step100) instead of `latest`
  --allow-non-finite   train on through a NaN/Inf loss or gradient norm (default: stop there,
                       before the weights change)
  --device D           auto (default: this rank's GPU when there is one, else the CPU), cpu or cuda
  --attention K        auto (default), fused or gemm: how causal attention is computed
                       (docs/nn.md, "Attention kernels")
)";
}

}  // namespace fathom::apps
