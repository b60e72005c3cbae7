#include "apps/train/train_options.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"
#include "launcher/text_parsing.h"

namespace fathom::apps {

using launcher::parse_flag_integer;  // the launcher's flag parsing, shared by every program

models::ModelSpec TrainOptions::model_spec() const {
  models::ModelSpec spec = model_dir.empty() ? models::ModelSpec::preset(arch, preset) : models::ModelSpec::from_folder(model_dir);
  apply_sizes(spec);
  return spec;
}

void TrainOptions::apply_sizes(models::ModelSpec& spec) const {
  spec.set_attention(attention);
  models::DecoderConfig& c = spec.decoder;
  const bool gpt2 = spec.architecture() == "gpt2";  // as many key/value heads as query heads, a 4 x MLP
  if (n_layer) c.n_layer = n_layer;
  if (n_head) c.n_head = n_head, c.n_kv_head = gpt2 || c.n_head % c.n_kv_head != 0 ? c.n_head : c.n_kv_head;
  if (n_kv_head) c.n_kv_head = n_kv_head;
  if (n_embd) c.hidden_size = n_embd, c.intermediate_size = gpt2 ? 4 * n_embd : (8 * n_embd / 3 + 15) / 16 * 16;  // Llama's ~8/3 x
  if (block_size && model_dir.empty()) c.max_positions = block_size;
  if (vocab_size) c.vocab_size = vocab_size;
  spec.validate();
}

int64_t TrainOptions::sequence_length(const models::ModelSpec& spec) const {
  const int64_t longest = spec.max_positions();
  FATHOM_CHECK(block_size <= longest, "--block-size ", block_size, " is longer than the model's ", longest,
               " positions (max_position_embeddings)");
  return block_size ? block_size : std::min<int64_t>(longest, 1024);
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
    else if (flag == "--arch") o.arch = value, o.arch_given = true;
    else if (flag == "--preset") o.preset = value, o.preset_given = true;
    else if (flag == "--init") o.init_path = value;
    else if (flag == "--model") o.model_dir = value;
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
    else if (flag == "--n-kv-head") o.n_kv_head = parse_flag_integer(flag, value, 1);
    else if (flag == "--n-embd") o.n_embd = parse_flag_integer(flag, value, 1);
    else if (flag == "--block-size") o.block_size = parse_flag_integer(flag, value, 1);
    else if (flag == "--vocab-size") o.vocab_size = parse_flag_integer(flag, value, 1);
    else FATHOM_FAIL("unknown option ", flag, "; see fathom-train --help");
  }
  if (o.model_dir.empty()) models::ModelSpec::preset(o.arch, o.preset);  // validates the names
  FATHOM_CHECK(o.model_dir.empty() || !(o.arch_given || o.preset_given || o.n_layer || o.n_head || o.n_kv_head ||
                                        o.n_embd || o.vocab_size || !o.init_path.empty()),
               "--model ", o.model_dir, " brings its own architecture, sizes and weights; drop --arch, --preset, "
               "--init and the size flags (--block-size still sets the training sequence length)");
  FATHOM_CHECK(o.init_path.empty() || o.arch == "gpt2", "--init reads GPT-2-layout weights; for ", o.arch,
               " give a Hugging Face model folder with --model");
  FATHOM_CHECK(o.n_kv_head == 0 || o.arch != "gpt2", "--n-kv-head needs a grouped-query architecture (--arch llama, "
               "qwen2 or mistral); GPT-2 has as many key/value heads as query heads");
  FATHOM_CHECK(o.val_data_path.empty() || !o.data_path.empty(), "--val-data ", o.val_data_path,
               " needs a --data file to validate against (the built-in corpus holds out its last 5%)");
  FATHOM_CHECK(o.resume_tag.empty() || !o.resume_dir.empty(), "--tag ", o.resume_tag,
               " names a checkpoint to resume from; give the folder too: --resume DIR --tag ", o.resume_tag);
  return o;
}

std::string train_usage() {
  return R"(usage: fathom-train [options]

Trains a decoder language model: GPT-2, or Llama, Qwen2 or Mistral from a preset or a Hugging Face
model folder. With no options: a small byte-level GPT on the built-in corpus (Fathom's own docs
and sources), 300 steps, output in runs/latest.

  --config FILE        DeepSpeed-style JSON or YAML config (default: built-in AdamW + cosine);
                       --deepspeed_config FILE is the same (DeepSpeed's flag)
  --data FILE          training data: a token file (nanoGPT raw uint16 or llm.c; GPT-2's
                       vocabulary unless --vocab-size) or a text file read as bytes (default:
                       the built-in corpus)
  --data-format F      auto (default: tokens for a .bin or llm.c file, text for a file without
                       NUL bytes), text or tokens
  --val-data FILE      validation data (default: val.bin beside a train.bin, else the last 5%)
  --arch NAME          gpt2 (default), llama, qwen2 or mistral (docs/models.md)
  --preset NAME        tiny or small; gpt2 also gpt2-124M, the others 100M and 350M (default small)
  --n-layer N --n-head N --n-kv-head N --n-embd N --block-size N --vocab-size N
                       override the preset's sizes (byte-level data sets vocab 256);
                       --block-size is the training sequence length
  --model DIR          fine-tune a Hugging Face model folder (config.json and model.safetensors or
                       shards): llama, qwen2, mistral or gpt2
  --init FILE          start a gpt2 preset from GPT-2-layout .safetensors weights (e.g. GPT-2's own)
  --steps N            optimizer steps (default 300)
  --out DIR            where the model goes as a Hugging Face folder (config.json, safetensors),
                       with the DeepSpeed config as ds_config.json (default runs/latest)
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
