#include "models/gpt2_hf_config.h"

#include <algorithm>
#include <set>

#include "core/did_you_mean.h"
#include "models/hf_fields.h"

namespace fathom::models {

DecoderConfig gpt2_config_from_hf(const JsonValue& json, const std::string& source) {
  static const std::vector<std::string> known{
      "n_layer", "n_head", "n_embd", "vocab_size", "n_positions", "n_ctx", "n_inner", "activation_function",
      "layer_norm_epsilon", "resid_pdrop", "embd_pdrop", "attn_pdrop", "tie_word_embeddings",
      "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "initializer_range",
      "bos_token_id", "eos_token_id", "pad_token_id", "architectures", "model_type", "transformers_version",
      "torch_dtype", "dtype", "use_cache", "summary_type", "summary_use_proj", "summary_activation",
      "summary_proj_to_labels", "summary_first_dropout", "task_specific_params", "_name_or_path",
      "add_cross_attention", "output_past", "n_special", "predict_special_tokens"};
  for (const auto& [key, value] : json.as_object())
    FATHOM_CHECK(std::find(known.begin(), known.end(), key) != known.end(), source, ": the field \"", key,
                 "\" is not supported for model_type gpt2", did_you_mean(key, known));
  const ConfigFields f(json, source);
  const int64_t width = f.integer("n_embd", 768);
  DecoderConfig c = DecoderConfig::gpt2(f.integer("n_layer", 12), f.integer("n_head", 12), width,
                                        f.integer("vocab_size", 50257), f.integer("n_positions", 1024));
  const int64_t inner = f.integer("n_inner", 0);
  FATHOM_CHECK(inner == 0 || inner == 4 * width, source, ": n_inner ", inner,
               " is not supported (Fathom's GPT-2 MLP is 4 x n_embd = ", 4 * width, " wide)");
  const std::string activation = f.text("activation_function", "gelu_new");
  FATHOM_CHECK(activation == "gelu_new" || activation == "gelu_pytorch_tanh", source, ": activation_function \"",
               activation, "\" is not supported (GPT-2's is gelu_new, the tanh approximation)");
  FATHOM_CHECK(f.number("layer_norm_epsilon", 1e-5) == 1e-5, source, ": layer_norm_epsilon must be GPT-2's 1e-5");
  FATHOM_CHECK(f.flag("scale_attn_weights", true) && !f.flag("scale_attn_by_inverse_layer_idx", false), source,
               ": attention scaled otherwise than by 1/sqrt(head size) is not supported");
  c.dropout = f.number("resid_pdrop", 0.0);
  c.tied_embeddings = f.flag("tie_word_embeddings", true);
  c.init_std = f.number("initializer_range", 0.02);
  c.bos_token_id = f.token_ids("bos_token_id");
  c.eos_token_id = f.token_ids("eos_token_id");
  c.validate();
  return c;
}

std::string gpt2_hf_config_json(const DecoderConfig& c) {
  c.validate();
  const DecoderConfig shape = DecoderConfig::gpt2(c.n_layer, c.n_head, c.hidden_size, c.vocab_size, c.max_positions);
  FATHOM_CHECK(c.norm == shape.norm && c.norm_eps == shape.norm_eps && c.positions == shape.positions &&
                   c.activation == shape.activation && c.n_kv_head == c.n_head && c.resolved_head_dim() * c.n_head == c.hidden_size &&
                   c.resolved_intermediate_size() == 4 * c.hidden_size && c.qkv_bias && c.o_bias && c.mlp_bias && c.norm_bias &&
                   c.sliding_window == 0,
               "a gpt2 config.json (GPT2Config) describes LayerNorm, learned positions, a GELU MLP 4 x wide, biases "
               "everywhere and as many key/value heads as query heads; this decoder has another shape");
  JsonWriter w;
  w.begin_object();
  w.key("architectures").begin_array(JsonWriter::Layout::Inline).value("GPT2LMHeadModel").end_array();
  w.member("model_type", "gpt2");
  w.member("vocab_size", static_cast<long long>(c.vocab_size));
  w.member("n_positions", static_cast<long long>(c.max_positions));
  w.member("n_embd", static_cast<long long>(c.hidden_size));
  w.member("n_layer", static_cast<long long>(c.n_layer));
  w.member("n_head", static_cast<long long>(c.n_head));
  w.key("n_inner").null();
  w.member("activation_function", "gelu_new");
  w.member("layer_norm_epsilon", 1e-5);
  w.member("resid_pdrop", c.dropout).member("embd_pdrop", c.dropout).member("attn_pdrop", 0.0);
  w.member("initializer_range", c.init_std);
  w.member("tie_word_embeddings", c.tied_embeddings);
  // transformers' GPT2Config defaults both to its last token (50256) when the file names none.
  const std::vector<int64_t> last{c.vocab_size - 1};
  write_token_ids(w, "bos_token_id", c.bos_token_id.empty() ? last : c.bos_token_id);
  write_token_ids(w, "eos_token_id", c.eos_token_id.empty() ? last : c.eos_token_id);
  w.member("torch_dtype", dtype_hf_name(c.dtype));
  w.end_object();
  return w.str() + "\n";
}

}  // namespace fathom::models
