#pragma once
// Rotary position embedding's frequencies: inv_freq[i] = 1 / θ^(2i / R) over the R rotated dims
// of a head, and the rules that rescale them for contexts longer than the model was trained
// on, as transformers computes them (modeling_rope_utils.py), in f32:
//   default  none
//   linear   inv_freq / factor                                  (position interpolation)
//   dynamic  θ · (factor · L / max_positions - (factor - 1))^(R / (R - 2)) once the sequence
//            length L exceeds max_positions (NTK-aware), the default below it
//   llama3   Llama 3.1's: wavelengths above original_max_positions / low_freq_factor divided
//            by factor, those below original_max_positions / high_freq_factor kept, a smooth
//            blend between
// The op applying them is kernels/rotary.h; a model passes these frequencies and the tokens'
// positions to it.

#include <string>

#include "core/tensor.h"

namespace fathom::nn {

struct RopeScaling {
  std::string type = "default";  // default, linear, dynamic, llama3
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_max_positions = 0;  // llama3 (and dynamic when set): the pre-training context
};

struct RopeConfig {
  double theta = 10000.0;
  int64_t rotary_dim = 0;  // R; 0 = the whole head
  RopeScaling scaling;
  // Throws naming the field when a value is out of range or the type unknown.
  void validate(int64_t head_dim, const std::string& where) const;
};

// The R/2 f32 frequencies for heads of `head_dim`, for a forward whose largest position is
// seq_len - 1 (only `dynamic` depends on it). max_positions: the model's max_position_embeddings.
Tensor rope_inv_freq(const RopeConfig& rope, int64_t head_dim, int64_t max_positions, int64_t seq_len);

}  // namespace fathom::nn
