#pragma once
// GPT-2's Hugging Face config.json (transformers' GPT2Config, model_type "gpt2") as the one
// decoder's config (DecoderConfig::gpt2) and back. Like models/hf_config.h for the Llama family: fields Fathom does not know are
// refused by name, values it cannot honour (another activation, an inner width other than
// 4 x n_embd, attention scaled by layer index) too; the double-heads summary_* fields and
// generation defaults are accepted, as they do not change the language model.

#include <string>

#include "core/json.h"
#include "models/decoder_config.h"

namespace fathom::models {

DecoderConfig gpt2_config_from_hf(const JsonValue& json, const std::string& source);
// Refuses a config GPT2Config cannot describe (another norm, positions, MLP, grouped heads, no biases).
std::string gpt2_hf_config_json(const DecoderConfig& config);

}  // namespace fathom::models
