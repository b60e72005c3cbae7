// fathom-generate: samples text from a model — a Hugging Face model folder (Llama, Qwen2, Mistral,
// GPT-2: what fathom-train writes, or transformers' save_pretrained), or a GPT-2-layout
// .safetensors file of fathom-export — one position per new token (key/value cache).
//
//   fathom-generate --model runs/latest --prompt "int main(" --max-tokens 200
//
// Byte-level models (vocab 256) take a text prompt and print text; larger vocabularies take
// token ids ("--prompt 464,3290,318") and print ids, until a GPT-2 BPE tokenizer arrives.
// Under `mpirun -np N` the model is tensor parallel over the N ranks (each holds its heads and
// their key/value cache, its MLP features and vocabulary rows) and prints what one process prints;
// rank 0 writes the text.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"
#include "core/threads.h"
#include "apps/job_errors.h"
#include "apps/train/train_options.h"
#include "models/generation.h"
#include "models/model_spec.h"
#include "nn/safetensors.h"
#include "parallel/runtime.h"

using namespace fathom;

namespace {

struct Options {
  std::string model_path, prompt = "\n";
  int64_t max_tokens = 200, top_k = 40;
  double temperature = 0.8, top_p = 1.0;
  uint64_t seed = 0;
  int threads = 0;
  std::string device = "auto";
};

const char* kUsage = R"(usage: fathom-generate --model DIR|FILE [options]

  --model DIR|FILE    a Hugging Face model folder (config.json and safetensors: llama, qwen2,
                      mistral or gpt2), or a model.safetensors fathom-train wrote (GPT-2 layout)
  --prompt TEXT       text for byte-level models; comma-separated token ids otherwise (default "\n")
  --max-tokens N      tokens to generate (default 200; past the block size the context slides)
  --temperature T     0 = greedy (default 0.8)
  --top-k K           sample among the K most likely tokens; 0 = all (default 40)
  --top-p P           then keep the fewest most likely tokens whose probability reaches P,
                      in (0, 1] (default 1: all of them)
  --seed N            sampling seed (default 0)
  --threads N         CPU threads
  --device D          auto (default: GPU 0 when there is one, else the CPU), cpu or cuda
)";

// A flag's whole-number value in [min, max]; anything else is an error naming the flag.
int64_t whole_number(const std::string& flag, const std::string& value, int64_t min,
                     int64_t max = std::numeric_limits<int64_t>::max()) {
  int64_t out = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), out);
  FATHOM_CHECK(error == std::errc() && end == value.data() + value.size() && out >= min && out <= max, flag,
               " takes a whole number",
               max == std::numeric_limits<int64_t>::max()
                   ? " >= " + std::to_string(min)
                   : " from " + std::to_string(min) + " to " + std::to_string(max),
               ", got \"", value, "\"");
  return out;
}

// --temperature: a finite number >= 0.
double real_number(const std::string& flag, const std::string& value) {
  double out = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), out);
  FATHOM_CHECK(error == std::errc() && end == value.data() + value.size() && std::isfinite(out) && out >= 0, flag,
               " takes a finite number >= 0 (0: greedy), got \"", value, "\"");
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    FATHOM_CHECK(i + 1 < argc, flag, ": missing value; see fathom-generate --help");
    const std::string value = argv[++i];
    if (flag == "--model")
      o.model_path = value;
    else if (flag == "--prompt")
      o.prompt = value;
    else if (flag == "--max-tokens")
      o.max_tokens = whole_number(flag, value, 1);
    else if (flag == "--temperature")
      o.temperature = real_number(flag, value);
    else if (flag == "--top-k")
      o.top_k = whole_number(flag, value, 0);
    else if (flag == "--top-p")
      o.top_p = real_number(flag, value);
    else if (flag == "--seed")
      o.seed = static_cast<uint64_t>(whole_number(flag, value, 0));
    else if (flag == "--threads")
      o.threads = static_cast<int>(whole_number(flag, value, 1, 4096));
    else if (flag == "--device")
      o.device = apps::device_option(value);
    else
      FATHOM_FAIL("unknown option ", flag, "; see fathom-generate --help");
  }
  FATHOM_CHECK(!o.model_path.empty(), "--model is required; see fathom-generate --help");
  FATHOM_CHECK(o.top_p > 0 && o.top_p <= 1, "--top-p takes a probability in (0, 1], got ", o.top_p,
               " (1 keeps every token)");
  return o;
}

// The GPT-2 a single .safetensors file's metadata describes (what fathom-export writes), checked
// against the tensors the file holds before anything is allocated: a damaged or hand-edited
// header ("n_layer": "99999999999") is an error naming the key, not a model that grows until the
// machine runs out of memory.
models::ModelSpec spec_from_metadata(const std::string& path) {
  const nn::SafetensorsFile file(path);
  const auto& meta = file.metadata();
  auto get = [&](const char* key) {
    FATHOM_CHECK(meta.count(key), path, ": no \"", key,
                 "\" in the file's metadata; fathom-generate reads a Hugging Face model folder, or a GPT-2 file "
                 "written by fathom-export");
    const std::string& text = meta.at(key);
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    FATHOM_CHECK(error == std::errc() && end == text.data() + text.size() && value >= 1, path, ": metadata \"", key,
                 "\" is \"", text,
                 "\", not a whole number >= 1; the file is damaged or was not written by fathom-export");
    return value;
  };
  const int64_t layers = get("n_layer"), width = get("n_embd"), vocab = get("vocab_size"), block = get("block_size");
  const auto expect = [&](const std::string& name, const Shape& shape) {
    FATHOM_CHECK(file.contains(name), path, ": the metadata describes a GPT with ", layers,
                 " layers, but the file has no tensor ", name, "; the metadata does not match the weights");
    FATHOM_CHECK(file.info(name).shape == shape, path, ": tensor ", name, " is ", shape_str(file.info(name).shape),
                 ", but the metadata (n_embd ", width, ", vocab_size ", vocab, ", block_size ", block, ") makes it ",
                 shape_str(shape), "; the metadata does not match the weights");
  };
  expect("transformer.wte.weight", {vocab, width});
  expect("transformer.wpe.weight", {block, width});
  expect("transformer.h." + std::to_string(layers - 1) + ".ln_1.weight", {width});
  FATHOM_CHECK(!file.contains("transformer.h." + std::to_string(layers) + ".ln_1.weight"), path,
               ": the file holds more than the ", layers, " layers its metadata says; the metadata does not match "
               "the weights");
  models::ModelSpec spec;
  spec.decoder = models::DecoderConfig::gpt2(layers, get("n_head"), width, vocab, block);
  spec.decoder.tied_embeddings = !file.contains("lm_head.weight");
  spec.validate();
  return spec;
}

std::vector<int64_t> prompt_tokens(const std::string& prompt, int64_t vocab) {
  std::vector<int64_t> tokens;
  if (vocab == 256) {
    for (unsigned char ch : prompt) tokens.push_back(ch);
  } else {
    std::stringstream in(prompt);
    for (std::string item; std::getline(in, item, ',');) {
      int64_t id = -1;
      const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), id);
      FATHOM_CHECK(error == std::errc() && end == item.data() + item.size(), "--prompt: \"", item,
                   "\" is not a token id; this model's vocabulary has ", vocab,
                   " tokens (not bytes), so the prompt is "
                   "comma-separated token ids such as 464,3113");
      FATHOM_CHECK(id >= 0 && id < vocab, "--prompt: token id ", id, " is outside the vocabulary (", vocab, ")");
      tokens.push_back(id);
    }
  }
  FATHOM_CHECK(!tokens.empty(), "--prompt is empty");
  return tokens;
}

// Feeds tokens and returns the next position's logits: the model's own forward over its KV
// cache, on one process, or under mpirun split over every rank (tensor parallelism: each rank
// decodes its heads and its rows of the vocabulary, the logits gathered).
class TokenFeed {
 public:
  TokenFeed(const std::string& path, const parallel::Runtime& runtime, Device device) {
    const models::ModelSpec spec = std::filesystem::is_directory(path) ? models::ModelSpec::from_folder(path)
                                                                       : spec_from_metadata(path);
    auto whole = std::make_shared<models::Decoder>(spec.decoder);
    spec.load(*whole, path);
    model_ = whole;
    if (runtime.size() > 1) {
      // Every rank is a tensor-parallel rank; NCCL carries device tensors when each rank has a GPU.
      const std::shared_ptr<parallel::Communicator> group =
          runtime.groups(/*pipeline=*/1, runtime.size()).for_device(parallel::Axis::Tensor, device);
      model_ = std::make_shared<models::Decoder>(spec.decoder, kDefaultSeed,
                                                 std::vector<bool>(spec.layers().size(), true),
                                                 std::make_shared<models::TensorParallelDecoderLayers>(group));
      model_->load_full(*whole);  // this rank's shards; the whole model is dropped here
    }
    model_->to(device);
    model_->eval();
    cache_ = model_->make_cache(1);
    vocab_ = spec.vocab_size(), block_ = spec.max_positions();
  }
  int64_t vocab_size() const { return vocab_; }
  int64_t block_size() const { return block_; }
  Tensor feed(const Tensor& tokens) { return models::next_token_logits(*model_, cache_, tokens); }
  int64_t position() const { return cache_.position; }
  void reset() { cache_.reset(); }

 private:
  int64_t vocab_ = 0, block_ = 0;
  std::shared_ptr<models::Decoder> model_;
  models::KVCache cache_;
};

int run(const Options& o, const parallel::Runtime& runtime) {
  if (o.threads > 0) set_num_threads(o.threads);
  const Device fallback = runtime.size() > 1 ? runtime.device() : cuda::device_count() > 0 ? Device::cuda(0) : kCPU;
  TokenFeed decoder(o.model_path, runtime, apps::resolve_device(o.device, fallback));
  const bool prints = runtime.is_main_process();
  const int64_t vocab = decoder.vocab_size();
  const std::vector<int64_t> prompt = prompt_tokens(o.prompt, vocab);
  Generator gen(o.seed);  // the same draws on every rank: the same tokens
  // The model sees at most block_size positions. When the cache is full, the context slides:
  // the cache restarts from the last half block of tokens (nanoGPT crops to the last block at
  // every token; refilling half a block at a time keeps the cache's one-position-per-token cost).
  const int64_t block = decoder.block_size();
  std::vector<int64_t> context = prompt;
  const auto feed_context = [&](size_t keep) {
    decoder.reset();
    const std::vector<int64_t> tail(context.end() - static_cast<std::ptrdiff_t>(keep), context.end());
    return decoder.feed(Tensor::from_vector<int64_t>(tail, {1, static_cast<int64_t>(tail.size())}));
  };
  Tensor logits = feed_context(std::min<size_t>(context.size(), static_cast<size_t>(block)));
  if (prints) std::fputs(vocab == 256 ? o.prompt.c_str() : "", stdout);
  for (int64_t i = 0; i < o.max_tokens; ++i) {
    const int64_t token = models::sample_token(logits.reshape({vocab}), o.temperature, o.top_k, gen, o.top_p);
    if (prints && vocab == 256)
      std::fputc(static_cast<int>(token), stdout);
    else if (prints)
      std::printf("%s%lld", i ? "," : "", static_cast<long long>(token));
    std::fflush(stdout);
    context.push_back(token);
    logits = decoder.position() < block ? decoder.feed(Tensor::from_vector<int64_t>({token}, {1, 1}))
                                        : feed_context(static_cast<size_t>(std::max<int64_t>(1, block / 2)));
  }
  if (prints) std::fputc('\n', stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  return apps::run_reporting_errors(runtime, [&] { return run(parse(argc, argv), runtime); });
}
