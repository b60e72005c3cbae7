#pragma once
// GPT-2 as a configuration of the one decoder (models/decoder.h) plus a weight-name adapter:
// LayerNorm (eps 1e-5), learned positions, GELU (tanh) MLP 4 x wide, biases everywhere, tied
// embeddings, as many key/value heads as query heads. Hugging Face GPT-2's tensors
// (transformer.wte, transformer.h.N.attn.c_attn, ... with Conv1D's [in, out] layout and q, k, v
// fused in c_attn) map onto the decoder's Llama-style names: c_attn's three column blocks are
// q_proj, k_proj and v_proj, c_proj is o_proj, c_fc is up_proj, mlp.c_proj is down_proj, ln_1,
// ln_2 and ln_f the three norms. Reading accepts the "transformer."-prefixed names and the hub
// checkpoint's bare ones and ignores the attention-mask buffers; writing gives what
// save_pretrained writes, so GPT2LMHeadModel loads it.

#include <map>
#include <string>

#include "models/decoder.h"
#include "models/gpt.h"

namespace fathom::models {

DecoderConfig gpt2_decoder_config(const GPTConfig& gpt);

// Linear weights GPT-2's Conv1D stores as [in, out] (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj).
bool is_gpt2_conv1d_weight(const std::string& name);
// The attention-mask buffers (attn.bias, attn.masked_bias) older GPT-2 files hold: never loaded.
bool is_gpt2_mask_buffer(const std::string& name);
// What a single GPT-2 .safetensors file of fathom-export carries beside the tensors: the model's
// sizes, so fathom-generate can read it without a config.json.
std::map<std::string, std::string> gpt2_safetensors_metadata(const DecoderConfig& config);

// Fills `decoder` (a gpt2_decoder_config model) from GPT-2 safetensors: a file, or a folder's
// model.safetensors. Under nn::DeferredInit each parameter records its read instead.
void load_gpt2_into_decoder(Decoder& decoder, const std::string& path);

// Tensors in the decoder's names and order (its weights, or their gradients) in GPT-2's names and
// layout; no lm_head.weight when the embeddings are tied.
nn::NamedTensors gpt2_tensors(const DecoderConfig& config, const nn::NamedTensors& decoder_tensors);

}  // namespace fathom::models
