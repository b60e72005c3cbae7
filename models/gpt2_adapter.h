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

#include <string>

#include "models/decoder.h"
#include "models/gpt.h"

namespace fathom::models {

DecoderConfig gpt2_decoder_config(const GPTConfig& gpt);

// Fills `decoder` (a gpt2_decoder_config model) from GPT-2 safetensors: a file, or a folder's
// model.safetensors. Under nn::DeferredInit each parameter records its read instead.
void load_gpt2_into_decoder(Decoder& decoder, const std::string& path);

// Tensors in the decoder's names and order (its weights, or their gradients) in GPT-2's names and
// layout; no lm_head.weight when the embeddings are tied.
nn::NamedTensors gpt2_tensors(const DecoderConfig& config, const nn::NamedTensors& decoder_tensors);

}  // namespace fathom::models
