#include "nn/rotary.h"

#include <cmath>
#include <numbers>

namespace fathom::nn {

void RopeConfig::validate(int64_t head_dim, const std::string& where) const {
  FATHOM_CHECK(theta > 0 && std::isfinite(theta), where, ": rope_theta must be a positive number, got ", theta);
  const int64_t R = rotary_dim == 0 ? head_dim : rotary_dim;
  FATHOM_CHECK(R > 0 && R % 2 == 0 && R <= head_dim, where, ": the rotary dims (", R,
               ") must be even and at most the head size ", head_dim);
  const std::string& t = scaling.type;
  FATHOM_CHECK(t == "default" || t == "linear" || t == "dynamic" || t == "llama3", where, ": rope_scaling type \"",
               t, "\" is not supported (supported: default, linear, dynamic, llama3)");
  if (t == "default") return;
  FATHOM_CHECK(scaling.factor >= 1 && std::isfinite(scaling.factor), where, ": rope_scaling factor must be >= 1, got ",
               scaling.factor);
  if (t == "llama3") {
    FATHOM_CHECK(scaling.original_max_positions > 0, where,
                 ": rope_scaling type llama3 needs original_max_position_embeddings > 0");
    FATHOM_CHECK(scaling.high_freq_factor > scaling.low_freq_factor && scaling.low_freq_factor > 0, where,
                 ": rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor, got ", scaling.low_freq_factor,
                 " and ", scaling.high_freq_factor);
  }
}

Tensor rope_inv_freq(const RopeConfig& rope, int64_t head_dim, int64_t max_positions, int64_t seq_len) {
  const int64_t R = rope.rotary_dim == 0 ? head_dim : rope.rotary_dim;
  const RopeScaling& s = rope.scaling;
  // transformers: base ** (arange(0, R, 2).float() / R), a float32 power of a float32 ratio.
  float base = static_cast<float>(rope.theta);
  if (s.type == "dynamic") {
    const int64_t trained = s.original_max_positions > 0 ? s.original_max_positions : max_positions;
    if (seq_len > trained) {
      const double grown = s.factor * static_cast<double>(seq_len) / static_cast<double>(trained) - (s.factor - 1);
      base = static_cast<float>(rope.theta * std::pow(grown, static_cast<double>(R) / static_cast<double>(R - 2)));
    }
  }
  std::vector<float> f(static_cast<size_t>(R / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(R));
  if (s.type == "linear") {
    for (float& x : f) x /= static_cast<float>(s.factor);
  } else if (s.type == "llama3") {
    const double old_context = static_cast<double>(s.original_max_positions);
    const double low_wavelen = old_context / s.low_freq_factor, high_wavelen = old_context / s.high_freq_factor;
    for (float& x : f) {
      const double wavelen = 2 * std::numbers::pi / x;
      if (wavelen > low_wavelen) {
        x = static_cast<float>(x / s.factor);  // low frequencies: interpolated
      } else if (wavelen >= high_wavelen) {    // the band between: a smooth blend
        const double smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = static_cast<float>((1 - smooth) * x / s.factor + smooth * x);
      }  // high frequencies: kept
    }
  }
  return Tensor::from_vector(f, {static_cast<int64_t>(f.size())});
}

}  // namespace fathom::nn
