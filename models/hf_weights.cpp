#include "models/hf_weights.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "autograd/grad_mode.h"
#include "core/json.h"
#include "core/json_writer.h"
#include "core/text_file.h"
#include "models/gpt2_adapter.h"
#include "models/hf_config.h"
#include "nn/deferred_init.h"

namespace fathom::models {
namespace {

namespace fs = std::filesystem;

const char* kSingleFile = "model.safetensors";
const char* kIndex = "model.safetensors.index.json";

// "a, b, c and 4 more"
std::string listing(const std::vector<std::string>& names) {
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 6);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

// Buffers some savers wrote beside the weights; they are recomputed, never loaded.
bool is_ignored_buffer(const std::string& name) { return name.ends_with("rotary_emb.inv_freq"); }

}  // namespace

HfWeights::HfWeights(const std::string& folder) : folder_(folder) {
  const fs::path dir(folder);
  if (fs::is_regular_file(dir)) {  // one .safetensors file
    const auto file = std::make_shared<const nn::SafetensorsFile>(folder);
    for (const std::string& name : file->names()) files_[name] = file;
    num_files_ = 1;
    return;
  }
  FATHOM_CHECK(fs::is_directory(dir), "model folder ", folder, " does not exist");
  if (fs::exists(dir / kIndex)) {
    const std::string index_path = (dir / kIndex).string();
    const JsonValue index = parse_json(read_text_file(index_path), index_path);
    FATHOM_CHECK(index.is_object() && index.find("weight_map") && index.at("weight_map").is_object(), index_path,
                 ": expected an object with a \"weight_map\" of tensor name -> shard file");
    std::map<std::string, std::shared_ptr<const nn::SafetensorsFile>> shards;
    for (const auto& [name, file] : index.at("weight_map").as_object()) {
      FATHOM_CHECK(file.is_string(), index_path, ": the shard of \"", name, "\" must be a file name");
      const std::string& shard = file.as_string();
      FATHOM_CHECK(shard.find('/') == std::string::npos && shard != ".." && !shard.empty(), index_path,
                   ": shard \"", shard, "\" must be a file name inside the folder");
      if (!shards.count(shard)) {
        const fs::path path = dir / shard;
        FATHOM_CHECK(fs::exists(path), index_path, " names the shard ", shard, " (for \"", name,
                     "\"), which is not in ", folder, "; copy the whole folder, every shard the index lists");
        shards[shard] = std::make_shared<const nn::SafetensorsFile>(path.string());
      }
      FATHOM_CHECK(shards[shard]->contains(name), index_path, " places \"", name, "\" in ", shard,
                   ", which does not hold it");
      files_[name] = shards[shard];
    }
    num_files_ = shards.size();
    return;
  }
  const fs::path single = dir / kSingleFile;
  FATHOM_CHECK(fs::exists(single), "no weights in ", folder, ": expected ", kSingleFile, " or ", kIndex,
               fs::exists(dir / "pytorch_model.bin") ? " (pytorch_model.bin is a pickle Fathom does not read; "
                                                       "save the model with safe_serialization=True)"
                                                     : "");
  *this = HfWeights(single.string());
  folder_ = folder;
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : files_) out.push_back(name);
  return out;
}

const nn::SafetensorsFile& HfWeights::file(const std::string& name) const {
  const auto it = files_.find(name);
  FATHOM_CHECK(it != files_.end(), "model folder ", folder_, " holds no tensor \"", name, "\"");
  return *it->second;
}

const nn::SafetensorsTensorInfo& HfWeights::info(const std::string& name) const { return file(name).info(name); }
Tensor HfWeights::get(const std::string& name) const { return file(name).get(name); }
const std::string& HfWeights::file_of(const std::string& name) const { return file(name).path(); }

void load_hf_weights(Decoder& model, const std::string& folder) {
  if (model.config().architecture == "gpt2") return load_gpt2_into_decoder(model, folder);  // its own names
  const auto weights = std::make_shared<const HfWeights>(folder);
  const DecoderConfig& config = model.config();
  std::set<std::string> used;
  std::vector<std::string> missing;
  for (const auto& [name, parameter] : model.named_parameters()) {
    if (!weights->contains(name)) {
      missing.push_back(name);
      continue;
    }
    const nn::SafetensorsTensorInfo& info = weights->info(name);
    FATHOM_CHECK(info.shape == parameter.sizes(), "model folder ", folder, ": \"", name, "\" has shape ",
                 shape_str(info.shape), " in ", weights->file_of(name), " but the config gives ",
                 shape_str(parameter.sizes()), " (is config.json this checkpoint's?)");
    FATHOM_CHECK(is_floating_point(info.dtype), "model folder ", folder, ": \"", name, "\" holds ",
                 dtype_name(info.dtype), " values; a weight must be f32, bf16 or f16");
    used.insert(name);
  }
  FATHOM_CHECK(missing.empty(), "model folder ", folder, ": ", missing.size(), " of the model's tensors are missing: ",
               listing(missing), " (is config.json this checkpoint's?)");
  std::vector<std::string> unexpected;
  for (const std::string& name : weights->names()) {
    const bool tied_head = name == "lm_head.weight" && config.tied_embeddings;
    if (!used.count(name) && !tied_head && !is_ignored_buffer(name)) unexpected.push_back(name);
  }
  FATHOM_CHECK(unexpected.empty(), "model folder ", folder, ": ", unexpected.size(),
               " tensors the model does not have: ", listing(unexpected),
               " (a different architecture, or a config.json that is not this checkpoint's?)");
  autograd::NoGradGuard no_grad;
  for (const auto& [name, parameter] : model.named_parameters()) {
    if (!nn::is_deferred(parameter)) {
      parameter.data().copy_(weights->get(name));
      continue;
    }
    // Built shard by shard (nn::DeferredInit): ZeRO stage 3 reads each tensor when it keeps its part.
    nn::defer_initial_value(parameter, [weights, name](const Tensor& out) { out.copy_(weights->get(name)); });
  }
}

std::vector<std::string> save_hf_model(const DecoderConfig& config, const nn::NamedTensors& weights,
                                       const std::string& folder, const HfSaveOptions& options) {
  FATHOM_CHECK(is_floating_point(options.dtype), "save_hf_model: dtype must be a float type, got ",
               dtype_name(options.dtype));
  FATHOM_CHECK(options.max_shard_bytes > 0, "save_hf_model: max_shard_bytes must be positive");
  fs::create_directories(folder);
  const fs::path dir(folder);
  DecoderConfig stored = config;
  stored.dtype = options.dtype;
  std::vector<std::string> written{(dir / "config.json").string()};
  write_hf_config(stored, written.front());

  // Shards in the model's order, a new one when the next tensor would overflow the bound.
  std::vector<nn::NamedTensors> shards(1);
  int64_t shard_bytes = 0, total_bytes = 0;
  for (const auto& [name, tensor] : config.architecture == "gpt2" ? gpt2_tensors(config, weights) : weights) {
    if (name == "lm_head.weight" && config.tied_embeddings) continue;
    const int64_t bytes = tensor.numel() * static_cast<int64_t>(element_size(options.dtype));
    if (shard_bytes > 0 && shard_bytes + bytes > options.max_shard_bytes) shards.emplace_back(), shard_bytes = 0;
    shards.back().emplace_back(name, tensor);
    shard_bytes += bytes;
    total_bytes += bytes;
  }
  // A folder saved before with another shard count must not keep stale files the index no longer names.
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file == kIndex || file == kSingleFile ||
        (file.rfind("model-", 0) == 0 && entry.path().extension() == ".safetensors"))
      fs::remove(entry.path());
  }
  // transformers reads "format"; a GPT-2 file also carries its sizes, so fathom-generate reads
  // the file alone.
  std::map<std::string, std::string> metadata{{"format", "pt"}};
  if (config.architecture == "gpt2") metadata.merge(gpt2_safetensors_metadata(config));
  // Each shard converted to the stored dtype as it is written: one shard's copy at a time.
  const auto write_shard = [&](const std::string& path, const nn::NamedTensors& shard) {
    nn::NamedTensors stored;
    for (const auto& [name, tensor] : shard)
      stored.emplace_back(name, tensor.dtype() == options.dtype ? tensor : tensor.to(options.dtype));
    nn::save_safetensors(path, stored, metadata);
  };
  if (shards.size() == 1) {
    written.push_back((dir / kSingleFile).string());
    write_shard(written.back(), shards.front());
    return written;
  }
  JsonWriter index;
  index.begin_object();
  index.key("metadata").begin_object(JsonWriter::Layout::Inline).member("total_size", static_cast<long long>(total_bytes));
  index.end_object();
  index.key("weight_map").begin_object();
  for (size_t k = 0; k < shards.size(); ++k) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    written.push_back((dir / file).string());
    write_shard(written.back(), shards[k]);
    for (const auto& [name, tensor] : shards[k]) index.member(name, file);
  }
  index.end_object().end_object();
  written.push_back((dir / kIndex).string());
  write_text_file(written.back(), index.str() + "\n");
  return written;
}

}  // namespace fathom::models
