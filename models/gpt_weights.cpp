#include "models/gpt_weights.h"

#include <memory>
#include <set>
#include <tuple>

#include "autograd/grad_mode.h"
#include "nn/deferred_init.h"
#include "models/gpt2_adapter.h"
#include "nn/safetensors.h"

namespace fathom::models {

std::map<std::string, std::string> gpt2_safetensors_metadata(const GPTConfig& c) {
  return gpt2_safetensors_metadata(gpt2_decoder_config(c));
}

void save_gpt2_safetensors(const GPT& model, const std::string& path) {
  nn::NamedTensors weights;
  for (const auto& [name, parameter] : model.named_parameters()) weights.emplace_back(name, parameter.data());
  save_gpt2_safetensors(model.config(), weights, path);
}

void save_gpt2_safetensors(const GPTConfig& c, const nn::NamedTensors& weights, const std::string& path) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, data] : weights)
    tensors.emplace_back(name, is_gpt2_conv1d_weight(name) ? data.t() : data);  // the writer copies views
  nn::save_safetensors(path, tensors, gpt2_safetensors_metadata(c));
}

void load_gpt2_safetensors(GPT& model, const std::string& path) {
  const auto mapped = std::make_shared<const nn::SafetensorsFile>(path);
  const nn::SafetensorsFile& file = *mapped;
  std::set<std::string> used;
  // The file's name for a parameter: prefixed, or the hub checkpoint's bare form.
  auto file_name = [&](const std::string& name) -> std::string {
    if (file.contains(name)) return name;
    const std::string prefix = "transformer.";
    if (name.rfind(prefix, 0) == 0 && file.contains(name.substr(prefix.size()))) return name.substr(prefix.size());
    return "";
  };
  std::vector<std::pair<Tensor, Tensor>> copies;  // (target, source): checked first, written after
  std::vector<std::tuple<autograd::Variable, std::string, bool>> deferred;  // (parameter, tensor, transposed)
  for (const auto& [name, parameter] : model.named_parameters()) {
    const std::string stored = file_name(name);
    FATHOM_CHECK(!stored.empty(), "GPT-2 weights ", path, ": no tensor for parameter \"", name,
                 "\" (looked for it with and without the \"transformer.\" prefix)");
    Tensor source = file.get(stored);
    if (is_gpt2_conv1d_weight(name)) source = source.t();
    FATHOM_CHECK(source.sizes() == parameter.sizes(), "GPT-2 weights ", path, ": \"", stored, "\" has shape ",
                 shape_str(is_gpt2_conv1d_weight(name) ? source.t().sizes() : source.sizes()), " but the model expects ",
                 shape_str(is_gpt2_conv1d_weight(name) ? parameter.data().t().sizes() : parameter.sizes()),
                 " (is the model config the file's? its metadata says n_embd=",
                 file.metadata().count("n_embd") ? file.metadata().at("n_embd") : std::string("?"), ")");
    if (nn::is_deferred(parameter)) deferred.emplace_back(parameter, stored, is_gpt2_conv1d_weight(name));
    else copies.emplace_back(parameter.data(), source);
    used.insert(stored);
  }
  for (const std::string& name : file.names()) {
    const bool tied_head = (name == "lm_head.weight") && model.config().tied_embeddings;
    FATHOM_CHECK(used.count(name) || is_gpt2_mask_buffer(name) || tied_head, "GPT-2 weights ", path,
                 ": unexpected tensor \"", name, "\" (a different model?)");
  }
  autograd::NoGradGuard no_grad;
  for (auto& [target, source] : copies) target.copy_(source);
  // Built shard by shard (nn::DeferredInit): each parameter reads its tensor from the mapped file
  // when ZeRO stage 3 makes it, one at a time.
  for (auto& [parameter, stored, transposed] : deferred)
    nn::defer_initial_value(parameter, [mapped, stored, transposed](const Tensor& out) {
      const Tensor source = mapped->get(stored);
      out.copy_(transposed ? source.t() : source);
    });
}

}  // namespace fathom::models
