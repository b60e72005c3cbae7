#include "models/model_spec.h"

#include <filesystem>
#include <sstream>

#include "core/text_file.h"
#include "models/decoder.h"
#include "models/hf_config.h"
#include "models/hf_weights.h"

namespace fathom::models {
namespace fs = std::filesystem;

const std::vector<std::string>& ModelSpec::architectures() {
  static const std::vector<std::string> names{"gpt2", "llama", "qwen2", "mistral"};
  return names;
}

ModelSpec ModelSpec::preset(const std::string& architecture, const std::string& name) {
  ModelSpec spec;
  if (architecture == "gpt2") {
    FATHOM_CHECK(name == "tiny" || name == "small" || name == "gpt2-124M", "unknown gpt2 preset \"", name,
                 "\"; use tiny, small or gpt2-124M");
    spec.decoder = DecoderConfig::preset(name == "gpt2-124M" ? name : "gpt2-" + name);
    return spec;
  }
  FATHOM_CHECK(architecture == "llama" || architecture == "qwen2" || architecture == "mistral", "architecture \"",
               architecture, "\" is not known; use gpt2, llama, qwen2 or mistral");
  FATHOM_CHECK(name == "tiny" || name == "small" || name == "100M" || name == "350M", "unknown ", architecture,
               " preset \"", name, "\"; use tiny, small, 100M or 350M");
  spec.decoder = DecoderConfig::preset("llama-" + name);
  spec.decoder.architecture = architecture;
  if (architecture == "qwen2") spec.decoder.qkv_bias = true, spec.decoder.rope.theta = 1e6;
  if (architecture == "mistral") spec.decoder.sliding_window = spec.decoder.max_positions / 2;
  return spec;
}

ModelSpec ModelSpec::from_json(const std::string& json, const std::string& source) {
  const JsonValue value = parse_json(json, source);
  FATHOM_CHECK(value.is_object(), source, ": expected a JSON object");
  ModelSpec spec;
  spec.decoder = decoder_config_from_hf(value, source);
  return spec;
}

ModelSpec ModelSpec::from_folder(const std::string& folder) {
  FATHOM_CHECK(fs::is_directory(folder), "model folder ", folder, " does not exist");
  const std::string config = (fs::path(folder) / "config.json").string();
  FATHOM_CHECK(fs::exists(config), "no config.json in ", folder,
               ": a Hugging Face model folder holds config.json beside its .safetensors files");
  return from_json(read_text_file(config), config);
}

void ModelSpec::validate() const { decoder.validate(); }
int64_t ModelSpec::parameter_count() const { return decoder.parameter_count(); }
int64_t ModelSpec::vocab_size() const { return decoder.vocab_size; }
void ModelSpec::set_vocab_size(int64_t v) { decoder.vocab_size = v; }
int64_t ModelSpec::hidden_size() const { return decoder.hidden_size; }
int64_t ModelSpec::max_positions() const { return decoder.max_positions; }
void ModelSpec::set_attention(nn::AttentionKernel kernel) { decoder.attention = kernel; }
std::vector<nn::LayerDescription> ModelSpec::layers() const { return decoder.layers(); }
std::string ModelSpec::block_type() const { return "DecoderLayer"; }

std::string ModelSpec::describe(bool with_vocab) const {
  std::ostringstream out;
  const std::string vocab = with_vocab ? ", vocab " + std::to_string(vocab_size()) : "";
  const DecoderConfig& d = decoder;
  out << architecture() << ": " << d.n_layer << " layers, " << d.n_head << " heads";
  if (d.n_kv_head != d.n_head) out << " (" << d.n_kv_head << " kv)";
  out << ", " << d.hidden_size << " wide" << vocab << ", " << d.max_positions << " positions";
  if (d.sliding_window > 0) out << ", window " << d.sliding_window;
  return out.str();
}

std::shared_ptr<nn::Module> ModelSpec::build(uint64_t seed, std::optional<std::vector<bool>> built) const {
  return built ? std::make_shared<Decoder>(decoder, seed, *built) : std::make_shared<Decoder>(decoder, seed);
}

void ModelSpec::load(nn::Module& model, const std::string& path) const {
  FATHOM_CHECK(fs::is_directory(path) || architecture() == "gpt2", architecture(),
               " weights are read from a Hugging Face model folder (config.json and .safetensors); ", path,
               " is not a folder");
  load_hf_weights(dynamic_cast<Decoder&>(model), path);  // gpt2's also from one GPT-2-layout file
}

std::string ModelSpec::save(const nn::NamedTensors& weights, const std::string& folder) const {
  return save_hf_model(decoder, weights, folder).back();
}

std::string ModelSpec::to_json() const { return hf_config_json(decoder); }

nn::LayerSequence& layer_sequence(nn::Module& model) {
  auto* layers = dynamic_cast<nn::LayerSequence*>(&model);
  FATHOM_CHECK(layers, "model ", model.type_name(), " is not a list of layers");
  return *layers;
}

}  // namespace fathom::models
