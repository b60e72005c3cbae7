#include "models/gpt2_hf_config.h"

#include <algorithm>
#include <set>

#include "core/did_you_mean.h"
#include "core/json_writer.h"
#include "models/hf_fields.h"

namespace fathom::models {

GPTConfig gpt2_config_from_hf(const JsonValue& json, const std::string& source) {
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
  GPTConfig c;
  c.n_layer = f.integer("n_layer", 12);
  c.n_head = f.integer("n_head", 12);
  c.n_embd = f.integer("n_embd", 768);
  c.vocab_size = f.integer("vocab_size", 50257);
  c.block_size = f.integer("n_positions", 1024);
  const int64_t inner = f.integer("n_inner", 0);
  FATHOM_CHECK(inner == 0 || inner == 4 * c.n_embd, source, ": n_inner ", inner,
               " is not supported (Fathom's GPT-2 MLP is 4 x n_embd = ", 4 * c.n_embd, " wide)");
  const std::string activation = f.text("activation_function", "gelu_new");
  FATHOM_CHECK(activation == "gelu_new" || activation == "gelu_pytorch_tanh", source, ": activation_function \"",
               activation, "\" is not supported (GPT-2's is gelu_new, the tanh approximation)");
  FATHOM_CHECK(f.number("layer_norm_epsilon", 1e-5) == 1e-5, source, ": layer_norm_epsilon must be GPT-2's 1e-5");
  FATHOM_CHECK(f.flag("scale_attn_weights", true) && !f.flag("scale_attn_by_inverse_layer_idx", false), source,
               ": attention scaled otherwise than by 1/sqrt(head size) is not supported");
  c.dropout = f.number("resid_pdrop", 0.0);
  c.tied_embeddings = f.flag("tie_word_embeddings", true);
  c.validate();
  return c;
}

std::string gpt2_hf_config_json(const GPTConfig& c) {
  c.validate();
  FATHOM_CHECK(c.bias, "a GPT without biases has no transformers GPT2Config (GPT-2 always has them)");
  JsonWriter w;
  w.begin_object();
  w.key("architectures").begin_array(JsonWriter::Layout::Inline).value("GPT2LMHeadModel").end_array();
  w.member("model_type", "gpt2");
  w.member("vocab_size", static_cast<long long>(c.vocab_size));
  w.member("n_positions", static_cast<long long>(c.block_size));
  w.member("n_embd", static_cast<long long>(c.n_embd));
  w.member("n_layer", static_cast<long long>(c.n_layer));
  w.member("n_head", static_cast<long long>(c.n_head));
  w.key("n_inner").null();
  w.member("activation_function", "gelu_new");
  w.member("layer_norm_epsilon", 1e-5);
  w.member("resid_pdrop", c.dropout).member("embd_pdrop", c.dropout).member("attn_pdrop", 0.0);
  w.member("tie_word_embeddings", c.tied_embeddings);
  w.member("bos_token_id", static_cast<long long>(c.vocab_size - 1));
  w.member("eos_token_id", static_cast<long long>(c.vocab_size - 1));
  w.member("torch_dtype", "float32");
  w.end_object();
  return w.str() + "\n";
}

}  // namespace fathom::models
