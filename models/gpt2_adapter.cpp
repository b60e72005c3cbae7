#include "models/gpt2_adapter.h"

#include <filesystem>
#include <map>
#include <set>

#include "autograd/grad_mode.h"
#include "core/shape_ops.h"
#include "models/hf_weights.h"
#include "nn/deferred_init.h"
#include "nn/safetensors.h"

namespace fathom::models {
namespace {

// Where a decoder parameter comes from in GPT-2's checkpoint: a tensor, stored transposed
// (Conv1D) or not, whole or one of c_attn's three blocks along the output features.
struct Source {
  std::string name;
  bool conv1d = false;
  int part = -1;  // 0, 1, 2: q, k, v of c_attn
};

Source source_of(const std::string& name) {
  const std::string layers = "model.layers.";
  if (name == "model.embed_tokens.weight") return {"transformer.wte.weight"};
  if (name == "model.embed_positions.weight") return {"transformer.wpe.weight"};
  if (name == "model.norm.weight") return {"transformer.ln_f.weight"};
  if (name == "model.norm.bias") return {"transformer.ln_f.bias"};
  if (name == "lm_head.weight") return {"lm_head.weight"};
  FATHOM_CHECK(name.rfind(layers, 0) == 0, "GPT-2 adapter: the decoder parameter \"", name, "\" has no GPT-2 tensor");
  const size_t dot = name.find('.', layers.size());
  const std::string block = "transformer.h." + name.substr(layers.size(), dot - layers.size()) + ".";
  const std::string rest = name.substr(dot + 1);
  const bool weight = rest.ends_with(".weight");
  const std::string kind = weight ? "weight" : "bias";
  const std::string module = rest.substr(0, rest.size() - kind.size() - 1);
  if (module == "input_layernorm") return {block + "ln_1." + kind};
  if (module == "post_attention_layernorm") return {block + "ln_2." + kind};
  if (module == "self_attn.q_proj") return {block + "attn.c_attn." + kind, weight, 0};
  if (module == "self_attn.k_proj") return {block + "attn.c_attn." + kind, weight, 1};
  if (module == "self_attn.v_proj") return {block + "attn.c_attn." + kind, weight, 2};
  if (module == "self_attn.o_proj") return {block + "attn.c_proj." + kind, weight};
  if (module == "mlp.up_proj") return {block + "mlp.c_fc." + kind, weight};
  if (module == "mlp.down_proj") return {block + "mlp.c_proj." + kind, weight};
  FATHOM_FAIL("GPT-2 adapter: the decoder parameter \"", name, "\" has no GPT-2 tensor");
}

// The decoder's view of a GPT-2 tensor: [out, in] (a Conv1D weight transposed), one block of c_attn.
Tensor decoder_view(const Tensor& stored, const Source& source) {
  Tensor t = source.conv1d ? stored.t() : stored;
  if (source.part < 0) return t;
  const int64_t third = t.size(0) / 3;
  return t.narrow(0, source.part * third, third);
}

}  // namespace

bool is_gpt2_mask_buffer(const std::string& name) {
  return name.ends_with("attn.bias") || name.ends_with("attn.masked_bias");
}

bool is_gpt2_conv1d_weight(const std::string& name) {
  for (const char* suffix : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

std::map<std::string, std::string> gpt2_safetensors_metadata(const DecoderConfig& c) {
  return {{"fathom.model", "gpt"},
          {"n_layer", std::to_string(c.n_layer)},
          {"n_head", std::to_string(c.n_head)},
          {"n_embd", std::to_string(c.hidden_size)},
          {"vocab_size", std::to_string(c.vocab_size)},
          {"block_size", std::to_string(c.max_positions)}};
}

DecoderConfig gpt2_decoder_config(const GPTConfig& g) {
  g.validate();
  DecoderConfig c = DecoderConfig::gpt2(g.n_layer, g.n_head, g.n_embd, g.vocab_size, g.block_size);
  c.qkv_bias = c.o_bias = c.mlp_bias = c.norm_bias = g.bias;
  c.tied_embeddings = g.tied_embeddings;
  c.dropout = g.dropout, c.dtype = g.dtype, c.attention = g.attention;
  return c;
}

void load_gpt2_into_decoder(Decoder& decoder, const std::string& path) {
  const auto mapped = std::make_shared<const HfWeights>(path);
  // The file's name for a tensor: prefixed, or the hub checkpoint's bare form.
  const auto stored_name = [&](const std::string& name) -> std::string {
    if (mapped->contains(name)) return name;
    const std::string prefix = "transformer.";
    if (name.rfind(prefix, 0) == 0 && mapped->contains(name.substr(prefix.size()))) return name.substr(prefix.size());
    FATHOM_FAIL("GPT-2 weights ", path, ": no tensor \"", name, "\" (looked with and without the \"transformer.\" prefix)");
  };
  std::set<std::string> used;
  std::vector<std::pair<autograd::Variable, std::pair<std::string, Source>>> reads;
  for (const auto& [name, parameter] : decoder.named_parameters()) {
    const Source source = source_of(name);
    const std::string stored = stored_name(source.name);
    const Tensor view = decoder_view(mapped->get(stored), source);
    FATHOM_CHECK(view.sizes() == parameter.sizes(), "GPT-2 weights ", path, ": \"", stored, "\" gives ",
                 name, " the shape ", shape_str(view.sizes()), " but the config gives ", shape_str(parameter.sizes()),
                 " (is config.json this checkpoint's?)");
    used.insert(stored);
    reads.push_back({parameter, {stored, source}});
  }
  for (const std::string& name : mapped->names()) {
    const bool tied_head = name == "lm_head.weight" && decoder.config().tied_embeddings;
    FATHOM_CHECK(used.count(name) || is_gpt2_mask_buffer(name) || tied_head, "GPT-2 weights ", path,
                 ": unexpected tensor \"", name, "\" (a different model?)");
  }
  autograd::NoGradGuard no_grad;
  for (const auto& [parameter, read] : reads) {
    const auto& [stored, source] = read;
    if (!nn::is_deferred(parameter)) {
      parameter.data().copy_(decoder_view(mapped->get(stored), source));
      continue;
    }
    nn::defer_initial_value(parameter, [mapped, stored = stored, source = source](const Tensor& out) {
      out.copy_(decoder_view(mapped->get(stored), source));
    });
  }
}

nn::NamedTensors gpt2_tensors(const DecoderConfig& config, const nn::NamedTensors& decoder_tensors) {
  std::map<std::string, std::vector<Tensor>> fused;  // c_attn's q, k, v blocks, in order
  nn::NamedTensors out;
  for (const auto& [name, tensor] : decoder_tensors) {
    const Source source = source_of(name);
    if (source.name == "lm_head.weight" && config.tied_embeddings) continue;
    if (source.part >= 0) {
      auto& parts = fused[source.name];
      parts.push_back(tensor);
      if (parts.size() < 3) continue;
      const Tensor whole = cat(parts, 0);  // [3C, C] or [3C]
      out.emplace_back(source.name, source.conv1d ? whole.t().contiguous() : whole);
      continue;
    }
    out.emplace_back(source.name, source.conv1d ? tensor.t().contiguous() : tensor);
  }
  return out;
}

}  // namespace fathom::models
