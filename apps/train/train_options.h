#pragma once
// fathom-train's command line.

#include <cstdint>
#include <optional>
#include <string>

#include "models/model_spec.h"

namespace fathom::apps {

// How --data is read (--data-format): Auto is tokens for a .bin or an llm.c file (its magic),
// text for a file with no NUL byte in its first 64 KiB, and otherwise an error asking for the flag.
enum class DataFormat { Auto, Text, Tokens };
DataFormat parse_data_format(const std::string& value);  // "auto", "text", "tokens"

struct TrainOptions {
  std::string config_path;  // empty: the built-in config
  std::string data_path;    // empty: the built-in corpus
  std::string val_data_path;  // empty: val.bin beside a train.bin, or the last 5% of the data
  DataFormat data_format = DataFormat::Auto;
  std::string arch = "gpt2";  // --arch: gpt2, llama, qwen2, mistral
  std::string preset = "small";
  int64_t n_layer = 0, n_head = 0, n_kv_head = 0, n_embd = 0, block_size = 0, vocab_size = 0;  // 0: the preset's
  std::string init_path;  // --init: GPT-2-layout weights for a gpt2 preset
  std::string model_dir;  // --model: a Hugging Face model folder to fine-tune (its config and weights)
  int64_t steps = 300;
  std::string out_dir = "runs/latest";
  std::optional<uint64_t> seed;
  int threads = 0;  // 0: the default rule
  int64_t eval_interval = 50;
  int eval_batches = 8;
  std::string resume_dir;      // resume from the latest checkpoint there
  std::string resume_tag;      // --tag: that checkpoint instead of `latest`
  int64_t save_every = 0;      // save a checkpoint to <out>/checkpoints every N steps (0: never)
  bool overwrite = false;      // --overwrite: replace the checkpoints of another run in --out
  std::string device = "auto";  // "auto" (this rank's GPU when there is one), "cpu" or "cuda"
  nn::AttentionKernel attention = nn::AttentionKernel::Auto;  // --attention
  bool allow_non_finite = false;  // --allow-non-finite: train on through NaN/Inf losses
  bool help = false;
  // Given on the command line (--resume defers to them).
  bool arch_given = false, preset_given = false, steps_given = false, save_every_given = false;

  // Whether --arch, --preset, --model or a size flag was given.
  bool model_flags_given() const {
    return arch_given || preset_given || !model_dir.empty() || n_layer || n_head || n_kv_head || n_embd || vocab_size;
  }

  // The model the flags describe: --model's folder, or --arch's --preset with the size flags
  // (and --attention) over it.
  models::ModelSpec model_spec() const;
  // The size flags (and --attention) over `spec`.
  void apply_sizes(models::ModelSpec& spec) const;
  // The training sequence length: --block-size, or the model's longest up to 1024.
  int64_t sequence_length(const models::ModelSpec& spec) const;
};

// The device `option` names for a rank whose runtime picked `runtime_device` (its GPU, or the
// CPU when there is none). Throws "no CUDA device: ..." for "cuda" without a GPU.
Device resolve_device(const std::string& option, Device runtime_device);
// `value` when it is a --device option (auto, cpu, cuda); throws naming the choices otherwise.
std::string device_option(const std::string& value);

// Throws fathom::Error naming the bad flag or value.
TrainOptions parse_train_options(int argc, const char* const* argv);
std::string train_usage();

}  // namespace fathom::apps
