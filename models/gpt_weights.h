#pragma once
// GPT weights in Hugging Face GPT-2's safetensors layout.
//
// Save writes the "transformer."-prefixed names and GPT-2's Conv1D layout ([in, out]) for the
// attn.c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj weights, omitting lm_head.weight when it is
// tied (transformers re-ties it on load), so transformers' GPT2LMHeadModel loads Fathom's file.
// Load accepts both the prefixed names and the bare ones of the hub's gpt2 checkpoint
// ("h.0.attn.c_attn.weight"), ignores the attn.bias / attn.masked_bias mask buffers and
// converts Conv1D's layout. Every missing or mis-shaped tensor is reported by name.

#include <map>
#include <string>

#include "models/gpt.h"

namespace fathom::models {

// The file's metadata (models/gpt2_adapter.h's, for the config's decoder).
std::map<std::string, std::string> gpt2_safetensors_metadata(const GPTConfig& config);

void save_gpt2_safetensors(const GPT& model, const std::string& path);
// The same from named weights in the model's order (an engine's consolidated_state_dict()).
void save_gpt2_safetensors(const GPTConfig& config, const nn::NamedTensors& weights, const std::string& path);
// A model built under nn::DeferredInit is not filled: each parameter records a read of its
// tensor from the mapped file, which ZeRO stage 3 runs when it shards that parameter.
void load_gpt2_safetensors(GPT& model, const std::string& path);

}  // namespace fathom::models
