#include "models/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/did_you_mean.h"
#include "core/json_writer.h"
#include "core/text_file.h"
#include "models/gpt2_hf_config.h"
#include "models/hf_fields.h"

namespace fathom::models {
namespace {

namespace fs = std::filesystem;

struct HfArchitecture {
  std::string model_type, class_name;
  std::vector<std::string> fields;  // what this model_type reads beyond the common ones
};

const std::vector<HfArchitecture>& architectures() {
  static const std::vector<HfArchitecture> all{
      {"llama", "LlamaForCausalLM", {"attention_bias", "mlp_bias", "pretraining_tp"}},
      {"qwen2", "Qwen2ForCausalLM", {"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}},
      {"mistral", "MistralForCausalLM", {"sliding_window"}},
  };
  return all;
}

// Read by every model_type.
const std::vector<std::string> kCommonFields{
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "hidden_act",
    "initializer_range", "tie_word_embeddings", "rope_theta", "rope_scaling", "rope_parameters",
    "attention_dropout", "bos_token_id", "eos_token_id"};

// transformers' PretrainedConfig bookkeeping and generation defaults: they do not change the
// function a model computes.
const std::set<std::string> kBenignFields{
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "_name_or_path",
    "_commit_hash", "_attn_implementation", "_attn_implementation_autoset", "use_cache", "pad_token_id",
    "sep_token_id", "decoder_start_token_id", "return_dict", "output_hidden_states", "output_attentions",
    "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads", "chunk_size_feed_forward",
    "is_encoder_decoder", "is_decoder", "add_cross_attention", "tie_encoder_decoder", "cross_attention_hidden_size",
    "finetuning_task", "id2label", "label2id", "tokenizer_class", "prefix", "task_specific_params", "problem_type",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "output_router_logits"};

// Rotary settings from v5's rope_parameters or v4's rope_theta + rope_scaling.
nn::RopeConfig read_rope(const ConfigFields& f) {
  nn::RopeConfig rope;
  rope.theta = f.number("rope_theta", 10000.0);
  const JsonValue* parameters = f.find("rope_parameters");
  const JsonValue* scaling = parameters ? parameters : f.find("rope_scaling");
  if (!scaling) return rope;
  const std::string where = f.source() + ": " + (parameters ? "rope_parameters" : "rope_scaling");
  FATHOM_CHECK(scaling->is_object(), where, " must be an object, got ", json_kind_name(scaling->kind()));
  const ConfigFields s(*scaling, where);
  static const std::vector<std::string> known{"rope_type",        "type",
                                              "rope_theta",       "factor",
                                              "low_freq_factor",  "high_freq_factor",
                                              "original_max_position_embeddings"};
  for (const auto& [key, value] : scaling->as_object())
    FATHOM_CHECK(std::find(known.begin(), known.end(), key) != known.end(), where, ": the field \"", key,
                 "\" is not supported", did_you_mean(key, known), "; Fathom reads ", "rope_type, rope_theta, factor, ",
                 "low_freq_factor, high_freq_factor and original_max_position_embeddings");
  rope.theta = s.number("rope_theta", rope.theta);
  std::string type = s.text("rope_type", s.text("type", "default"));
  if (type == "dynamic" || type == "linear" || type == "llama3" || type == "default") {
    rope.scaling.type = type;
  } else {
    FATHOM_FAIL(where, ": rope_type \"", type, "\" is not supported (supported: default, linear, dynamic, llama3)");
  }
  rope.scaling.factor = s.number("factor", 1.0);
  rope.scaling.low_freq_factor = s.number("low_freq_factor", 1.0);
  rope.scaling.high_freq_factor = s.number("high_freq_factor", 4.0);
  rope.scaling.original_max_positions = s.integer("original_max_position_embeddings", 0);
  return rope;
}

// Qwen2's window: none, or the same on every layer (Fathom's decoder has one window).
int64_t qwen2_window(const ConfigFields& f, int64_t n_layer) {
  if (!f.flag("use_sliding_window", false)) return 0;
  const int64_t window = f.integer("sliding_window", 0, true);
  const int64_t full_layers = std::min(f.integer("max_window_layers", 0), n_layer);
  // transformers: layers below max_window_layers attend to everything, the rest in the window.
  FATHOM_CHECK(full_layers == 0 || full_layers == n_layer, f.source(), ": use_sliding_window with max_window_layers ",
               full_layers, " of ", n_layer,
               " layers gives some layers a window and others none; Fathom's decoder has one window for every layer");
  return full_layers == n_layer ? 0 : window;
}

void check_layer_types(const ConfigFields& f, int64_t window) {
  const JsonValue* types = f.find("layer_types");
  if (!types) return;
  FATHOM_CHECK(types->is_array(), f.source(), ": \"layer_types\" must be a list");
  const std::string expected = window > 0 ? "sliding_attention" : "full_attention";
  for (const JsonValue& type : types->as_array())
    FATHOM_CHECK(type.is_string() && type.as_string() == expected, f.source(), ": layer_types mixes attention types (",
                 "found ", type.is_string() ? "\"" + type.as_string() + "\"" : std::string("a non-string"),
                 " where the other settings give \"", expected, "\"); Fathom's decoder has one for every layer");
}

}  // namespace

DecoderConfig decoder_config_from_hf(const JsonValue& json, const std::string& source) {
  FATHOM_CHECK(json.is_object(), source, ": expected a JSON object");
  const ConfigFields f(json, source);
  const std::string model_type = f.text("model_type", "");
  FATHOM_CHECK(!model_type.empty(), source,
               ": no \"model_type\"; is this a Hugging Face model's config.json? (supported: gpt2, llama, qwen2, mistral)");
  if (model_type == "gpt2") return gpt2_config_from_hf(json, source);
  const auto arch = std::find_if(architectures().begin(), architectures().end(),
                                 [&](const HfArchitecture& a) { return a.model_type == model_type; });
  FATHOM_CHECK(arch != architectures().end(), source, ": model_type \"", model_type,
               "\" is not supported (supported: gpt2, llama, qwen2, mistral)");
  // Every field is known before any is used.
  std::vector<std::string> known = kCommonFields;
  known.insert(known.end(), arch->fields.begin(), arch->fields.end());
  for (const auto& [key, value] : json.as_object()) {
    if (std::find(known.begin(), known.end(), key) != known.end() || kBenignFields.count(key)) continue;
    FATHOM_CHECK(key != "quantization_config", source,
                 ": quantized weights (quantization_config) are not supported; use the unquantized checkpoint");
    FATHOM_FAIL(source, ": the field \"", key, "\" is not supported for model_type ", model_type,
                did_you_mean(key, known), "; Fathom refuses what it cannot honour rather than compute another model");
  }
  if (const JsonValue* classes = f.find("architectures"); classes && classes->is_array())
    for (const JsonValue& name : classes->as_array())
      FATHOM_CHECK(name.is_string() && name.as_string() == arch->class_name, source, ": architectures names ",
                   name.is_string() ? name.as_string() : std::string("a non-string"), "; Fathom reads ",
                   arch->class_name, " for model_type ", model_type);

  DecoderConfig c;
  c.architecture = model_type;
  c.vocab_size = f.integer("vocab_size", 0, true);
  c.hidden_size = f.integer("hidden_size", 0, true);
  c.intermediate_size = f.integer("intermediate_size", 0, true);
  c.n_layer = f.integer("num_hidden_layers", 0, true);
  c.n_head = f.integer("num_attention_heads", 0, true);
  c.n_kv_head = f.integer("num_key_value_heads", c.n_head);
  c.head_dim = f.integer("head_dim", 0);
  c.max_positions = f.integer("max_position_embeddings", 2048);
  c.norm = Norm::RMSNorm;
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.positions = Positions::Rotary;
  c.rope = read_rope(f);
  c.activation = Activation::SwiGlu;
  const std::string act = f.text("hidden_act", "silu");
  FATHOM_CHECK(act == "silu" || act == "swish", source, ": hidden_act \"", act,
               "\" is not supported for model_type ", model_type, " (the gated MLP is silu's)");
  c.tied_embeddings = f.flag("tie_word_embeddings", false);
  c.init_std = f.number("initializer_range", 0.02);
  const double attention_dropout = f.number("attention_dropout", 0.0);
  FATHOM_CHECK(attention_dropout == 0.0, source, ": attention_dropout ", attention_dropout,
               " is not supported (the fused attention has no dropout); set it to 0.0");
  c.bos_token_id = f.token_ids("bos_token_id");
  c.eos_token_id = f.token_ids("eos_token_id");
  if (model_type == "llama") {
    c.qkv_bias = c.o_bias = f.flag("attention_bias", false);
    c.mlp_bias = f.flag("mlp_bias", false);
  } else if (model_type == "qwen2") {
    c.qkv_bias = true;
    c.sliding_window = qwen2_window(f, c.n_layer);
  } else if (model_type == "mistral") {
    // transformers' MistralConfig: 4096 when absent, none when null.
    c.sliding_window = json.find("sliding_window") ? f.integer("sliding_window", 0) : 4096;
  }
  check_layer_types(f, c.sliding_window);
  c.validate();
  return c;
}

DecoderConfig read_hf_config(const std::string& path) {
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  FATHOM_CHECK(fs::exists(file), "no config.json in ", path,
               ": a Hugging Face model folder holds config.json beside its .safetensors files");
  return decoder_config_from_hf(parse_json(read_text_file(file), file), file);
}

std::string hf_config_json(const DecoderConfig& c) {
  c.validate();
  if (c.architecture == "gpt2") return gpt2_hf_config_json(c);
  const auto arch = std::find_if(architectures().begin(), architectures().end(),
                                 [&](const HfArchitecture& a) { return a.model_type == c.architecture; });
  FATHOM_CHECK(arch != architectures().end(), "cannot write a Hugging Face config for architecture \"",
               c.architecture, "\" (supported: gpt2, llama, qwen2, mistral)");
  FATHOM_CHECK(c.norm == Norm::RMSNorm && c.positions == Positions::Rotary && c.activation == Activation::SwiGlu,
               "a ", c.architecture, " config.json describes RMSNorm, rotary positions and a gated SiLU MLP");
  const bool llama = c.architecture == "llama";
  FATHOM_CHECK(llama ? c.qkv_bias == c.o_bias : (c.qkv_bias == (c.architecture == "qwen2") && !c.o_bias),
               "the ", c.architecture, " config.json cannot express these attention biases (q/k/v ", c.qkv_bias,
               ", o ", c.o_bias, ")");
  FATHOM_CHECK(llama || !c.mlp_bias, "the ", c.architecture, " config.json has no MLP biases");
  FATHOM_CHECK(!llama || c.sliding_window == 0, "the llama config.json has no sliding window (use mistral)");
  FATHOM_CHECK(c.rope.rotary_dim == 0, "a ", c.architecture, " config.json rotates the whole head");

  JsonWriter w;
  w.begin_object();
  w.key("architectures").begin_array(JsonWriter::Layout::Inline).value(arch->class_name).end_array();
  w.member("model_type", c.architecture);
  w.member("vocab_size", static_cast<long long>(c.vocab_size));
  w.member("hidden_size", static_cast<long long>(c.hidden_size));
  w.member("intermediate_size", static_cast<long long>(c.resolved_intermediate_size()));
  w.member("num_hidden_layers", static_cast<long long>(c.n_layer));
  w.member("num_attention_heads", static_cast<long long>(c.n_head));
  w.member("num_key_value_heads", static_cast<long long>(c.n_kv_head));
  w.member("head_dim", static_cast<long long>(c.resolved_head_dim()));
  w.member("max_position_embeddings", static_cast<long long>(c.max_positions));
  w.member("rms_norm_eps", c.norm_eps);
  w.member("hidden_act", "silu");
  w.member("initializer_range", c.init_std);
  w.member("tie_word_embeddings", c.tied_embeddings);
  w.member("rope_theta", c.rope.theta);
  if (c.rope.scaling.type == "default") {
    w.key("rope_scaling").null();
  } else {
    const nn::RopeScaling& s = c.rope.scaling;
    w.key("rope_scaling").begin_object(JsonWriter::Layout::Inline).member("rope_type", s.type).member("factor", s.factor);
    if (s.type == "llama3")
      w.member("low_freq_factor", s.low_freq_factor).member("high_freq_factor", s.high_freq_factor);
    if (s.original_max_positions > 0)
      w.member("original_max_position_embeddings", static_cast<long long>(s.original_max_positions));
    w.end_object();
  }
  w.member("attention_dropout", 0.0);
  write_token_ids(w, "bos_token_id", c.bos_token_id);
  write_token_ids(w, "eos_token_id", c.eos_token_id);
  if (llama) w.member("attention_bias", c.qkv_bias).member("mlp_bias", c.mlp_bias);
  if (c.architecture == "qwen2") {
    w.member("use_sliding_window", c.sliding_window > 0);
    if (c.sliding_window > 0) w.member("sliding_window", static_cast<long long>(c.sliding_window));
    else w.key("sliding_window").null();
    w.member("max_window_layers", 0LL);
  }
  if (c.architecture == "mistral") {
    if (c.sliding_window > 0) w.member("sliding_window", static_cast<long long>(c.sliding_window));
    else w.key("sliding_window").null();
  }
  w.member("torch_dtype", dtype_hf_name(c.dtype));
  w.end_object();
  return w.str() + "\n";
}

void write_hf_config(const DecoderConfig& config, const std::string& path) {
  write_text_file(path, hf_config_json(config));
}

}  // namespace fathom::models
