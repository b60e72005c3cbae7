#pragma once
// One decoder-only transformer described by data: what distinguishes Llama 2/3, Qwen2 and
// Mistral and GPT-2 is a handful of choices — the norm, how positions
// enter, which projections carry biases, grouped-query heads, a sliding window, the MLP's
// activation, tied embeddings — not a forward of their own. models/decoder.h builds the model
// from it; models/hf_config.h reads and writes it as a Hugging Face config.json.

#include <string>
#include <vector>

#include "core/dtype.h"
#include "nn/attention_kernel.h"
#include "nn/layer_sequence.h"
#include "nn/rotary.h"

namespace fathom::models {

enum class Norm { LayerNorm, RMSNorm };
enum class Positions { Learned, Rotary };
enum class Activation { GeluTanh, SwiGlu };  // GPT-2's MLP, or the gated SiLU one (gate, up, down)

struct DecoderConfig {
  std::string architecture = "llama";  // its name in the model registry and its config.json model_type
  int64_t n_layer = 2;
  int64_t hidden_size = 64;
  int64_t n_head = 4;
  int64_t n_kv_head = 4;          // < n_head: grouped-query attention (1: multi-query)
  int64_t head_dim = 0;           // 0: hidden_size / n_head
  int64_t intermediate_size = 0;  // the MLP's width; 0: 4 x hidden_size
  int64_t vocab_size = 256;
  int64_t max_positions = 128;  // max_position_embeddings
  Norm norm = Norm::RMSNorm;
  double norm_eps = 1e-6;
  bool norm_bias = true;  // LayerNorm's bias (nanoGPT's bias=False drops it with the projections')
  Positions positions = Positions::Rotary;
  nn::RopeConfig rope;
  bool qkv_bias = false;  // biases on q, k and v (Qwen2; Llama's attention_bias also sets o_bias)
  bool o_bias = false;
  bool mlp_bias = false;
  int64_t sliding_window = 0;  // > 0: every layer attends to that many latest keys (Mistral)
  Activation activation = Activation::SwiGlu;
  bool tied_embeddings = false;
  double init_std = 0.02;  // initializer_range
  // GPT-2's initialisation: the residual projections (o_proj, down_proj) drawn with
  // init_std / sqrt(2 n_layer), as transformers' GPT2 and nanoGPT do.
  bool scaled_residual_init = false;
  double dropout = 0.0;
  DType dtype = DType::F32;
  nn::AttentionKernel attention = nn::AttentionKernel::Auto;
  // Special tokens, as config.json carries them (generation stops at an eos token).
  std::vector<int64_t> bos_token_id, eos_token_id;

  // "llama-tiny" (2 layers, 64 wide, GQA 4:2, the tests' and the demo's), "llama-small" (4
  // layers, 256 wide, GQA 8:2), and the benchmarks' "llama-100M" (12 x 768, GQA 12:4) and
  // "llama-350M" (24 x 1024, GQA 16:4), both with Llama 2's 32000-token vocabulary; GPT-2's
  // "gpt2-tiny" (2 x 64, 2 heads), "gpt2-small" (4 x 256, 4 heads) and "gpt2-124M" (GPT-2 small).
  static DecoderConfig preset(const std::string& name);
  // GPT-2's choices at the given size: LayerNorm (eps 1e-5), learned positions, a GELU (tanh) MLP
  // 4 x wide, biases on every projection, tied embeddings, as many key/value heads as query heads.
  static DecoderConfig gpt2(int64_t n_layer, int64_t n_head, int64_t width, int64_t vocab_size, int64_t positions);
  int64_t resolved_head_dim() const { return head_dim > 0 ? head_dim : hidden_size / n_head; }
  int64_t resolved_intermediate_size() const { return intermediate_size > 0 ? intermediate_size : 4 * hidden_size; }
  // Throws naming the field and the rule it breaks.
  void validate() const;
  // Trainable elements, without building the model (Decoder::parameter_count agrees; tested).
  int64_t parameter_count() const;
  // The layers a pipeline partitions: "DecoderEmbedding", n_layer x "DecoderLayer", "DecoderHead"
  // (the head counting a tied embedding again, as the model's layer_parameters lists it).
  std::vector<nn::LayerDescription> layers() const;
};

}  // namespace fathom::models
