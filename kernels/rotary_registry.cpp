// Op-registry entry of the rotary position embedding (kernels/rotary.h): an f64 reference that
// rotates each pair by the f32 angle the op defines, samples with shared and per-batch
// positions, offset positions (a KV cache's), partial rotary and non-contiguous inputs, bad
// inputs, and the gradient: the inverse rotation of the output's gradient.
#include <cmath>

#include "kernels/op_registry.h"
#include "kernels/op_samples.h"
#include "kernels/rotary.h"

namespace fathom {
namespace {

using samples::non_contiguous;
using samples::uniform_tensor;

bool inverse_attr(const Attributes& a) { return a.get_bool("inverse", false); }

// Hugging Face's default frequencies for `rotated` dims at base 10000, as f32.
Tensor default_inv_freq(int64_t rotated) {
  std::vector<float> f(static_cast<size_t>(rotated / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / static_cast<float>(rotated));
  return Tensor::from_vector(f, {static_cast<int64_t>(f.size())});
}

Tensor positions(std::vector<int64_t> values, const Shape& shape, DType dtype = DType::I64) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).reshape(shape).to(dtype);
}

Tensor arange_positions(int64_t begin, int64_t count) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = begin + i;
  return positions(v, {count});
}

TensorList reference(const TensorList& in, const Attributes& a) {
  const Tensor& x = in[0];
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  const std::vector<double> xs = x.contiguous().to_vector<double>();
  const std::vector<int64_t> pos = in[1].to_vector<int64_t>();
  const std::vector<double> freq = in[2].to_vector<double>();
  const int64_t half = static_cast<int64_t>(freq.size());
  const bool batched = in[1].dim() == 2;
  const double sign = inverse_attr(a) ? -1.0 : 1.0;
  std::vector<double> out(xs);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t p = pos[static_cast<size_t>(batched ? b * T + t : t)];
        const int64_t row = ((b * H + h) * T + t) * D;
        for (int64_t i = 0; i < half; ++i) {
          const double angle = static_cast<float>(static_cast<float>(p) * static_cast<float>(freq[i]));
          const double c = std::cos(angle), s = sign * std::sin(angle);
          const double x1 = xs[row + i], x2 = xs[row + i + half];
          out[row + i] = x1 * c - x2 * s;
          out[row + i + half] = x2 * c + x1 * s;
        }
      }
  return {Tensor::from_vector(out, {static_cast<int64_t>(out.size())}).reshape(x.sizes())};
}

OpInfo rotary_embedding_entry() {
  OpInfo info;
  info.name = "rotary_embedding";
  // Per rotated pair: 4 multiplies, 2 adds (the cos/sin are per position, shared by the heads).
  info.cost = [](const TensorList& in, const TensorList&, const Attributes&) {
    return OpCost{0, 3 * in[0].numel() / in[0].size(3) * in[2].numel() * 2};
  };
  info.dtypes = {DType::F32, DType::F64, DType::BF16, DType::F16};
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    return TensorList{rotary_embedding(in[0], in[1], in[2], inverse_attr(a))};
  };
  info.reference = reference;
  info.samples = [](DType dtype, Generator& gen) {
    std::vector<int64_t> per_batch(2 * 5);
    for (size_t i = 0; i < per_batch.size(); ++i) per_batch[i] = static_cast<int64_t>((i * 7) % 11);  // left padding, caches
    return std::vector<OpSample>{
        {"(2, 3, 5, 8), positions 0..4", {uniform_tensor({2, 3, 5, 8}, dtype, gen), arange_positions(0, 5), default_inv_freq(8)}, {}},
        {"positions offset by a cache of 37", {uniform_tensor({1, 2, 4, 16}, dtype, gen), arange_positions(37, 4), default_inv_freq(16)}, {}},
        {"per-batch i32 positions (B, T)",
         {uniform_tensor({2, 2, 5, 6}, dtype, gen), positions(per_batch, {2, 5}, DType::I32), default_inv_freq(6)}, {}},
        {"partial rotary: 4 of 10 dims", {uniform_tensor({1, 3, 3, 10}, dtype, gen), arange_positions(1, 3), default_inv_freq(4)}, {}},
        {"inverse (the backward's rotation)", {uniform_tensor({2, 2, 3, 8}, dtype, gen), arange_positions(0, 3), default_inv_freq(8)},
         Attributes{{"inverse", true}}},
        {"non-contiguous (B, T, H, D) transposed", {non_contiguous(uniform_tensor({2, 4, 3, 8}, dtype, gen)).transpose(1, 2),
         arange_positions(2, 4), default_inv_freq(8)}, {}},
        {"threaded (4, 8, 64, 64)", {uniform_tensor({4, 8, 64, 64}, dtype, gen), arange_positions(0, 64), default_inv_freq(64)}, {}}};
  };
  info.error_cases = [] {
    const Tensor x = Tensor::zeros({2, 3, 5, 8});
    return std::vector<OpErrorCase>{
        {"3-d x", {Tensor::zeros({3, 5, 8}), arange_positions(0, 5), default_inv_freq(8)}, {},
         "rotary_embedding: x must be (B, H, T, D), got shape [3, 5, 8]"},
        {"positions of the wrong length", {x, arange_positions(0, 4), default_inv_freq(8)}, {},
         "rotary_embedding: positions must be (T) = [5] or (B, T) = [2, 5] for x of shape [2, 3, 5, 8], got shape [4]"},
        {"float positions", {x, Tensor::zeros({5}), default_inv_freq(8)}, {},
         "rotary_embedding: positions must be i64 or i32"},
        {"f64 inv_freq", {x, arange_positions(0, 5), default_inv_freq(8).to(DType::F64)}, {},
         "rotary_embedding: inv_freq must be a 1-D f32 tensor of R/2 frequencies"},
        {"more rotated dims than the head has", {x, arange_positions(0, 5), default_inv_freq(10)}, {},
         "rotary_embedding: inv_freq has 5 frequencies, so 10 rotated dims, more than the head size D = 8"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    return TensorList{rotary_embedding(ctx.grad_outputs[0], ctx.inputs[1], ctx.inputs[2], !inverse_attr(ctx.attrs)),
                      Tensor(), Tensor()};
  };
  info.nondifferentiable_inputs = {1, 2};
  info.tolerance = [](DType dtype) {
    // f32: cosf/sinf round the factors once more than the f64 reference does.
    return dtype == DType::F32 ? Tolerance{2e-5, 2e-5} : default_tolerance(dtype);
  };
  return info;
}

}  // namespace

void register_position_ops(std::vector<OpInfo>& registry) { registry.push_back(rotary_embedding_entry()); }

}  // namespace fathom
