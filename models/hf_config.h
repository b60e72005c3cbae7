#pragma once
// A Hugging Face config.json as a DecoderConfig and back: model_type "llama", "qwen2" and
// "mistral" (transformers' LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM) here, and
// "gpt2" (GPT2LMHeadModel) through models/gpt2_hf_config.h. Both layouts of rotary settings are read: transformers v4's top-level
// rope_theta with rope_scaling {"type" or "rope_type", "factor", ...}, and v5's
// rope_parameters {"rope_type", "rope_theta", ...}.
//
// Strict like the DeepSpeed config reader: a field Fathom does not know is refused by name (with
// the nearest known one), and so is a value it cannot honour (hidden_act "gelu" for Llama, a
// yarn rope, attention dropout, quantized weights, Qwen2's sliding window on only some layers),
// rather than loading a model that silently computes something else. Fields that do not change
// the function (token ids, generation defaults, the saving library's bookkeeping) are accepted.
//
// Writing gives v4's layout (rope_theta, rope_scaling), which transformers v4.45+ and v5 both
// read, with model_type and architectures set so AutoModelForCausalLM picks the class.

#include <string>

#include "core/json.h"
#include "models/decoder_config.h"

namespace fathom::models {

// `source` names the text in messages (the file's path).
DecoderConfig decoder_config_from_hf(const JsonValue& json, const std::string& source);
// `path`: a config.json, or a folder holding one.
DecoderConfig read_hf_config(const std::string& path);

std::string hf_config_json(const DecoderConfig& config);
void write_hf_config(const DecoderConfig& config, const std::string& path);

}  // namespace fathom::models
