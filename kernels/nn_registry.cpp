// Op-registry entries of the fused neural-network ops: softmax, log_softmax, layernorm,
// rmsnorm, embedding, cross_entropy, dropout and causal_attention. Each has a naive f64
// reference (plain loops over rows, a full T x T score matrix for attention), samples with odd
// sizes, non-contiguous inputs and rows long enough to be split across threads, error cases
// and a gradient built on the op's own backward kernel. Saved statistics (mean, rstd, lse) are
// extra outputs after the differentiable one, so gradients read them from ctx.outputs.
#include <cmath>
#include <limits>

#include "core/philox.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/normalization.h"
#include "kernels/op_registry.h"
#include "kernels/op_samples.h"
#include "kernels/softmax.h"

namespace fathom {
namespace {

using samples::non_contiguous;
using samples::uniform_tensor;

const std::vector<DType> kFloatTypes = {DType::F32, DType::F64, DType::BF16, DType::F16};

// --- reference helpers: tensors as f64 rows of their last dim ---

struct Rows {
  std::vector<double> values;
  int64_t count, width;
  explicit Rows(const Tensor& t) : values(t.to_vector<double>()), width(t.dim() == 0 ? 1 : t.size(-1)) {
    count = width == 0 ? 0 : static_cast<int64_t>(values.size()) / width;
  }
  const double* row(int64_t r) const { return values.data() + r * width; }
};

Shape without_last(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

Tensor f64_tensor(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).reshape(shape);
}

double row_logsumexp(const double* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

std::vector<int64_t> random_indices(int64_t count, int64_t high, Generator& gen) {
  return randint({count}, gen, 0, high, DType::I64).to_vector<int64_t>();
}

// Tolerances: f32 kernels sum rows in fixed lanes, bf16/f16 outputs are rounded once.
Tolerance nn_tolerance(DType dtype) {
  switch (dtype) {
    case DType::F64:
      return {1e-12, 1e-10};
    case DType::F32:
      return {1e-5, 1e-5};
    case DType::BF16:
      return {1e-2, 1e-2};
    case DType::F16:
      return {2e-3, 2e-3};
    default:
      return {0, 0};
  }
}

// --- softmax / log_softmax ---

OpInfo softmax_entry(bool log) {
  const std::string name = log ? "log_softmax" : "softmax";
  OpInfo info;
  info.name = name;
  info.cost = per_output_element;
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [log](const TensorList& in, const Attributes&) {
    return TensorList{log ? log_softmax(in[0]) : softmax(in[0])};
  };
  info.reference = [log](const TensorList& in, const Attributes&) {
    const Rows x(in[0]);
    std::vector<double> y(x.values.size());
    for (int64_t r = 0; r < x.count; ++r) {
      const double lse = row_logsumexp(x.row(r), x.width);
      for (int64_t i = 0; i < x.width; ++i) y[r * x.width + i] = log ? x.row(r)[i] - lse : std::exp(x.row(r)[i] - lse);
    }
    return TensorList{f64_tensor(y, in[0].sizes())};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto make = [&](const Shape& shape, double lo = -3, double hi = 3) {
      return uniform_tensor(shape, dtype, gen, lo, hi);
    };
    return std::vector<OpSample>{
        {"[4, 7]", {make({4, 7})}, {}},
        {"odd rows [3, 37]", {make({3, 37})}, {}},
        {"3-d [2, 3, 5]", {make({2, 3, 5})}, {}},
        {"one element per row [5, 1]", {make({5, 1})}, {}},
        {"non-contiguous [6, 5]", {non_contiguous(make({6, 5}))}, {}},
        {"large logits [3, 9] in [60, 90] (overflow without the max shift)", {make({3, 9}, 60, 90)}, {}},
        {"threaded [96, 515]", {make({96, 515})}, {}},
        {"long rows [3, 3000] (a block per row on CUDA)", {make({3, 3000})}, {}},
        {"odd long rows [2, 5001]", {make({2, 5001})}, {}}};
  };
  info.error_cases = [name] {
    return std::vector<OpErrorCase>{
        {"integer input",
         {Tensor::zeros({2, 3}, DType::I64)},
         {},
         name + ": x must be a floating-point tensor (f32, f64, f16, bf16), got i64 of shape [2, 3]"},
        {"0-d input", {Tensor::scalar(1.0)}, {}, name + ": x must have at least one dim"}};
  };
  info.gradient = [log](const GradientContext& ctx) {
    return TensorList{log ? log_softmax_backward(ctx.grad_outputs[0], ctx.outputs[0])
                          : softmax_backward(ctx.grad_outputs[0], ctx.outputs[0])};
  };
  info.gradient_uses_inputs = false;
  info.gradient_uses_outputs = true;
  info.tolerance = nn_tolerance;
  return info;
}

// --- causal_softmax (attention's probabilities from its scores) ---

OpInfo causal_softmax_entry() {
  OpInfo info;
  info.name = "causal_softmax";
  info.cost = per_output_element;  // the whole T×T matrix, masked half included
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    return TensorList{causal_softmax(in[0], a.get_double("scale"))};
  };
  // Row by row: query i of each (Tq, Tk) matrix over its visible keys, zeros after them.
  info.reference = [](const TensorList& in, const Attributes& a) {
    const Rows x(in[0]);
    const double scale = a.get_double("scale");
    const int64_t Tq = in[0].size(-2), Tk = in[0].size(-1);
    std::vector<double> y(x.values.size(), 0.0), scaled(Tk);
    for (int64_t r = 0; r < x.count; ++r) {
      const int64_t visible = r % Tq + Tk - Tq + 1;
      for (int64_t j = 0; j < visible; ++j) scaled[j] = scale * x.row(r)[j];
      const double lse = row_logsumexp(scaled.data(), visible);
      for (int64_t j = 0; j < visible; ++j) y[r * Tk + j] = std::exp(scaled[j] - lse);
    }
    return TensorList{f64_tensor(y, in[0].sizes())};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto make = [&](const Shape& shape) { return uniform_tensor(shape, dtype, gen, -3, 3); };
    const Attributes eighth{{"scale", 0.125}}, one{{"scale", 1.0}};
    return std::vector<OpSample>{
        {"square [2, 3, 5, 5], scale 0.125", {make({2, 3, 5, 5})}, eighth},
        {"fewer queries than keys [3, 4, 9], scale 1", {make({3, 4, 9})}, one},
        {"one query [2, 1, 7]", {make({2, 1, 7})}, eighth},
        {"non-contiguous [6, 6]", {non_contiguous(make({6, 6}))}, one},
        {"warp rows, 16-byte packs [1, 2, 72, 72]", {make({1, 2, 72, 72})}, eighth},
        {"block rows [1, 1, 3, 1100] (a block per row on CUDA)", {make({1, 1, 3, 1100})}, eighth},
        {"odd widths [2, 33, 37]", {make({2, 33, 37})}, one}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{
        {"1-d scores", {Tensor::zeros({4})}, {{"scale", 1.0}},
         "causal_softmax: x must be attention scores (..., Tq, Tk), got shape [4]"},
        {"more queries than keys", {Tensor::zeros({5, 4})}, {{"scale", 1.0}},
         "causal_softmax: the scores have 5 queries but 4 keys; causal attention needs at least as many keys as "
         "queries"},
        {"zero scale", {Tensor::zeros({2, 2})}, {{"scale", 0.0}},
         "causal_softmax: scale must be positive and finite, got 0"},
        {"integer scores", {Tensor::zeros({2, 2}, DType::I64)}, {{"scale", 1.0}},
         "causal_softmax: x must be a floating-point tensor (f32, f64, f16, bf16), got i64"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    return TensorList{causal_softmax_backward(ctx.grad_outputs[0], ctx.outputs[0], ctx.attrs.get_double("scale"))};
  };
  info.gradient_uses_inputs = false;
  info.gradient_uses_outputs = true;
  info.tolerance = nn_tolerance;
  return info;
}

// --- layernorm / rmsnorm ---

OpInfo layernorm_entry() {
  OpInfo info;
  info.name = "layernorm";
  info.cost = [](const TensorList& in, const TensorList&, const Attributes&) {
    return OpCost{0, in[0].numel() * (in[1].defined() ? 5 : 4)};  // DeepSpeed's estimate, affine or not
  };
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    LayerNormOutputs r = layernorm(in[0], in[1], in[2], a.get_double("eps", 1e-5));
    return TensorList{r.y, r.mean, r.rstd};
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const Rows x(in[0]);
    const std::vector<double> w = in[1].to_vector<double>(), b = in[2].to_vector<double>();
    const double eps = a.get_double("eps", 1e-5);
    std::vector<double> y(x.values.size()), mean(x.count), rstd(x.count);
    for (int64_t r = 0; r < x.count; ++r) {
      double m = 0, var = 0;
      for (int64_t i = 0; i < x.width; ++i) m += x.row(r)[i] / x.width;
      for (int64_t i = 0; i < x.width; ++i) var += (x.row(r)[i] - m) * (x.row(r)[i] - m) / x.width;
      mean[r] = m;
      rstd[r] = 1 / std::sqrt(var + eps);
      for (int64_t i = 0; i < x.width; ++i) y[r * x.width + i] = (x.row(r)[i] - m) * rstd[r] * w[i] + b[i];
    }
    const Shape stats = without_last(in[0].sizes());
    return TensorList{f64_tensor(y, in[0].sizes()), f64_tensor(mean, stats), f64_tensor(rstd, stats)};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto sample = [&](const std::string& what, Tensor x, double eps = 1e-5) {
      const int64_t C = x.size(-1);
      return OpSample{what,
                      {x, uniform_tensor({C}, dtype, gen, 0.5, 1.5), uniform_tensor({C}, dtype, gen, -1, 1)},
                      Attributes{{"eps", eps}}};
    };
    return std::vector<OpSample>{
        sample("[4, 8]", uniform_tensor({4, 8}, dtype, gen, -2, 2)),
        sample("odd rows [3, 37], eps 0.1", uniform_tensor({3, 37}, dtype, gen, -2, 2), 0.1),
        sample("3-d [2, 3, 7]", uniform_tensor({2, 3, 7}, dtype, gen, -2, 2)),
        sample("non-contiguous [6, 5]", non_contiguous(uniform_tensor({6, 5}, dtype, gen, -2, 2))),
        sample("offset rows [4, 6] in [10, 11]", uniform_tensor({4, 6}, dtype, gen, 10, 11)),
        sample("threaded [300, 257]", uniform_tensor({300, 257}, dtype, gen, -2, 2)),
        sample("long rows [3, 5120] (a block per row on CUDA)", uniform_tensor({3, 5120}, dtype, gen, -2, 2)),
        sample("odd long rows [2, 2051]", uniform_tensor({2, 2051}, dtype, gen, -2, 2))};
  };
  info.error_cases = [] {
    const Attributes eps{{"eps", 1e-5}};
    return std::vector<OpErrorCase>{
        {"weight of the wrong length",
         {Tensor::zeros({4, 6}), Tensor::ones({5}), Tensor::zeros({6})},
         eps,
         "layernorm: weight of shape [5] does not match the last dim of x of shape [4, 6]; pass a weight of shape [6]"},
        {"bias of another dtype",
         {Tensor::zeros({4, 6}), Tensor::ones({6}), Tensor::zeros({6}, DType::F64)},
         eps,
         "layernorm: bias must have the dtype of Tensor[f32, cpu, [4, 6]], got Tensor[f64, cpu, [6]]"},
        {"integer x",
         {Tensor::zeros({4, 6}, DType::I32), Tensor::ones({6}), Tensor::zeros({6})},
         eps,
         "layernorm: x must be a floating-point tensor (f32, f64, f16, bf16), got i32 of shape [4, 6]"},
        {"negative eps",
         {Tensor::zeros({4, 6}), Tensor::ones({6}), Tensor::zeros({6})},
         Attributes{{"eps", -1.0}},
         "layernorm: eps must be non-negative, got -1"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const LayerNormGrads g =
        layernorm_backward(ctx.grad_outputs[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[1], ctx.outputs[2],
                           ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[2]);
    return TensorList{g.dx, g.dweight, g.dbias};
  };
  info.gradient_uses_outputs = true;
  info.differentiable_outputs = 1;
  // The offset-rows sample (mean 10.5, spread 0.3) makes dx ~35x more sensitive to the order of
  // f32 sums than centred rows: the GPU's lane-tree order lands 2e-5 from the CPU's there.
  info.tolerance = [](DType dtype) { return dtype == DType::F32 ? Tolerance{5e-5, 5e-5} : nn_tolerance(dtype); };
  return info;
}

OpInfo rmsnorm_entry() {
  OpInfo info;
  info.name = "rmsnorm";
  info.cost = [](const TensorList& in, const TensorList&, const Attributes&) {
    return OpCost{0, 4 * in[0].numel()};  // square, mean, scale by the rms, by the weight
  };
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    RmsNormOutputs r = rmsnorm(in[0], in[1], a.get_double("eps", 1e-6));
    return TensorList{r.y, r.rstd};
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const Rows x(in[0]);
    const std::vector<double> w = in[1].to_vector<double>();
    const double eps = a.get_double("eps", 1e-6);
    std::vector<double> y(x.values.size()), rstd(x.count);
    for (int64_t r = 0; r < x.count; ++r) {
      double ms = 0;
      for (int64_t i = 0; i < x.width; ++i) ms += x.row(r)[i] * x.row(r)[i] / x.width;
      rstd[r] = 1 / std::sqrt(ms + eps);
      for (int64_t i = 0; i < x.width; ++i) y[r * x.width + i] = x.row(r)[i] * rstd[r] * w[i];
    }
    return TensorList{f64_tensor(y, in[0].sizes()), f64_tensor(rstd, without_last(in[0].sizes()))};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto sample = [&](const std::string& what, Tensor x, double eps = 1e-6) {
      return OpSample{what, {x, uniform_tensor({x.size(-1)}, dtype, gen, 0.5, 1.5)}, Attributes{{"eps", eps}}};
    };
    return std::vector<OpSample>{
        sample("[4, 8]", uniform_tensor({4, 8}, dtype, gen, -2, 2)),
        sample("odd rows [3, 37], eps 0.1", uniform_tensor({3, 37}, dtype, gen, -2, 2), 0.1),
        sample("3-d [2, 3, 7]", uniform_tensor({2, 3, 7}, dtype, gen, -2, 2)),
        sample("non-contiguous [6, 5]", non_contiguous(uniform_tensor({6, 5}, dtype, gen, -2, 2))),
        sample("threaded [300, 257]", uniform_tensor({300, 257}, dtype, gen, -2, 2)),
        sample("long rows [3, 5120] (a block per row on CUDA)", uniform_tensor({3, 5120}, dtype, gen, -2, 2)),
        sample("odd long rows [2, 2051]", uniform_tensor({2, 2051}, dtype, gen, -2, 2))};
  };
  info.error_cases = [] {
    const Attributes eps{{"eps", 1e-6}};
    return std::vector<OpErrorCase>{
        {"weight of the wrong length",
         {Tensor::zeros({4, 6}), Tensor::ones({7})},
         eps,
         "rmsnorm: weight of shape [7] does not match the last dim of x of shape [4, 6]; pass a weight of shape [6]"},
        {"bool x",
         {Tensor::zeros({4, 6}, DType::Bool), Tensor::ones({6})},
         eps,
         "rmsnorm: x must be a floating-point tensor (f32, f64, f16, bf16), got bool of shape [4, 6]"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const RmsNormGrads g = rmsnorm_backward(ctx.grad_outputs[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[1],
                                            ctx.needs_input_grad[0], ctx.needs_input_grad[1]);
    return TensorList{g.dx, g.dweight};
  };
  info.gradient_uses_outputs = true;
  info.tolerance = nn_tolerance;
  return info;
}

// --- embedding ---

OpInfo embedding_entry() {
  OpInfo info;
  info.name = "embedding";
  info.cost = [](const TensorList&, const TensorList&, const Attributes&) { return OpCost{}; };  // a lookup
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes&) { return TensorList{embedding(in[0], in[1])}; };
  info.reference = [](const TensorList& in, const Attributes&) {
    const std::vector<int64_t> idx = in[0].to_vector<int64_t>();
    const Rows w(in[1]);
    std::vector<double> out;
    for (int64_t i : idx) out.insert(out.end(), w.row(i), w.row(i) + w.width);
    Shape shape = in[0].sizes();
    shape.push_back(w.width);
    return TensorList{f64_tensor(out, shape)};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto indices = [&](const Shape& shape, int64_t V, DType index_dtype = DType::I64) {
      return Tensor::from_vector(random_indices(shape_numel(shape), V, gen), {shape_numel(shape)})
          .reshape(shape)
          .to(index_dtype);
    };
    return std::vector<OpSample>{
        {"i64 [6] into [7, 3] (repeats)", {indices({6}, 7), uniform_tensor({7, 3}, dtype, gen)}, {}},
        {"i32 [2, 3] into [5, 4]", {indices({2, 3}, 5, DType::I32), uniform_tensor({5, 4}, dtype, gen)}, {}},
        {"non-contiguous indices and weight",
         {non_contiguous(indices({3, 4}, 6)), non_contiguous(uniform_tensor({6, 5}, dtype, gen))},
         {}},
        {"0-d index", {Tensor::scalar(2.0, DType::I64), uniform_tensor({4, 3}, dtype, gen)}, {}},
        {"threaded [40, 50] into [301, 67]", {indices({40, 50}, 301), uniform_tensor({301, 67}, dtype, gen)}, {}}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{
        {"index out of range",
         {Tensor::from_vector<int64_t>({1, 9, 0}), Tensor::zeros({7, 3})},
         {},
         "embedding: index 9 at (flat) position 1 is out of range for an embedding of 7 rows (valid: 0 to 6)"},
        {"negative index",
         {Tensor::from_vector<int32_t>({-1}), Tensor::zeros({7, 3})},
         {},
         "embedding: index -1 at (flat) position 0 is out of range"},
        {"float indices",
         {Tensor::zeros({3}), Tensor::zeros({7, 3})},
         {},
         "embedding: indices must be i64 or i32, got f32 of shape [3] (convert them with .to(i64))"},
        {"1-d weight",
         {Tensor::zeros({3}, DType::I64), Tensor::zeros({7})},
         {},
         "embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape [7]"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    return TensorList{Tensor(), embedding_backward(ctx.grad_outputs[0], ctx.inputs[0], ctx.input_sizes[1][0])};
  };
  info.nondifferentiable_inputs = {0};
  info.tolerance = nn_tolerance;
  return info;
}

// --- cross_entropy ---

std::optional<double> normaliser_attr(const Attributes& a) {
  return a.has("normaliser") ? std::optional<double>(a.get_double("normaliser")) : std::nullopt;
}

OpInfo cross_entropy_entry() {
  OpInfo info;
  info.name = "cross_entropy";
  // Its log-softmax, one flop per logit as a softmax counts (DeepSpeed does not count the loss).
  info.cost = [](const TensorList& in, const TensorList&, const Attributes&) { return OpCost{0, in[0].numel()}; };
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    CrossEntropyOutputs r = cross_entropy(in[0], in[1], normaliser_attr(a), a.get_int("ignore_index", -100));
    return TensorList{r.loss, r.lse};
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const Rows x(in[0]);
    const std::vector<int64_t> targets = in[1].to_vector<int64_t>();
    const int64_t ignore = a.get_int("ignore_index", -100);
    std::vector<double> lse(x.count);
    double total = 0;
    int64_t counted = 0;
    for (int64_t r = 0; r < x.count; ++r) {
      lse[r] = row_logsumexp(x.row(r), x.width);
      if (targets[r] == ignore) continue;
      total += lse[r] - x.row(r)[targets[r]];
      ++counted;
    }
    const double norm = a.has("normaliser") ? a.get_double("normaliser") : std::max<int64_t>(counted, 1);
    return TensorList{Tensor::scalar(total / norm, DType::F64), f64_tensor(lse, without_last(in[0].sizes()))};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto targets = [&](const Shape& shape, int64_t V, std::vector<int64_t> overrides = {}) {
      std::vector<int64_t> t = random_indices(shape_numel(shape), V, gen);
      for (size_t i = 0; i < overrides.size() && i < t.size(); ++i)
        if (overrides[i] != 0) t[i] = overrides[i];
      return Tensor::from_vector(t, {static_cast<int64_t>(t.size())}).reshape(shape);
    };
    auto logits = [&](const Shape& shape) { return uniform_tensor(shape, dtype, gen, -4, 4); };
    return std::vector<OpSample>{
        {"mean over [5, 7]", {logits({5, 7}), targets({5}, 7)}, {}},
        {"ignore_index -100 in rows 0 and 2", {logits({4, 9}), targets({4}, 9, {-100, 0, -100})}, {}},
        {"external normaliser 3.5 and ignore_index 1",
         {logits({6, 5}), targets({6}, 5, {1, 1})},
         Attributes{{"normaliser", 3.5}, {"ignore_index", int64_t{1}}}},
        {"3-d logits [2, 3, 6]", {logits({2, 3, 6}), targets({2, 3}, 6)}, {}},
        {"non-contiguous logits [4, 37]", {non_contiguous(logits({4, 37})), targets({4}, 37)}, {}},
        {"every target ignored", {logits({2, 4}), targets({2}, 4, {-100, -100})}, {}},
        {"threaded [64, 1003]", {logits({64, 1003}), targets({64}, 1003)}, {}}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{
        {"target out of range",
         {Tensor::zeros({3, 7}), Tensor::from_vector<int64_t>({0, 9, 2})},
         {},
         "cross_entropy: target 9 in row 1 is out of range for V = 7 classes (valid: 0 to 6, or ignore_index = -100)"},
        {"i32 targets",
         {Tensor::zeros({3, 7}), Tensor::from_vector<int32_t>({0, 1, 2})},
         {},
         "cross_entropy: targets must be i64 class indices, got i32 (convert them with .to(i64))"},
        {"targets of the wrong shape",
         {Tensor::zeros({3, 7}), Tensor::from_vector<int64_t>({0, 1})},
         {},
         "cross_entropy: targets of shape [2] must be logits' shape without the class dim, [3] (logits are [3, 7])"},
        {"zero normaliser",
         {Tensor::zeros({3, 7}), Tensor::from_vector<int64_t>({0, 1, 2})},
         Attributes{{"normaliser", 0.0}},
         "cross_entropy: normaliser must be a positive number, got 0"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    return TensorList{cross_entropy_backward(ctx.grad_outputs[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[1],
                                             normaliser_attr(ctx.attrs), ctx.attrs.get_int("ignore_index", -100)),
                      Tensor()};
  };
  info.gradient_uses_outputs = true;
  info.nondifferentiable_inputs = {1};
  info.tolerance = nn_tolerance;
  return info;
}

// --- dropout ---

struct DropoutArgs {
  double p;
  uint64_t seed, offset;
  int64_t column_offset, full_width;
  explicit DropoutArgs(const Attributes& a)
      : p(a.get_double("p")),
        seed(static_cast<uint64_t>(a.get_int("seed"))),
        offset(static_cast<uint64_t>(a.get_int("offset", 0))),
        column_offset(a.get_int("column_offset", 0)),
        full_width(a.get_int("full_width", -1)) {}
};

OpInfo dropout_entry() {
  OpInfo info;
  info.name = "dropout";
  info.cost = [](const TensorList&, const TensorList&, const Attributes&) { return OpCost{}; };  // as DeepSpeed
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    const DropoutArgs d(a);
    return TensorList{dropout(in[0], d.p, d.seed, d.offset, in[1], d.column_offset, d.full_width)};
  };
  // The mask straight from its definition (kernels/dropout.h), compared in f64.
  info.reference = [](const TensorList& in, const Attributes& a) {
    const DropoutArgs d(a);
    const Rows x(in[0]);
    const std::vector<int64_t> sample = in[1].to_vector<int64_t>();
    const int64_t full = d.full_width < 0 ? x.width : d.full_width;
    std::vector<double> y(x.values.size());
    for (int64_t r = 0; r < x.count; ++r)
      for (int64_t c = 0; c < x.width; ++c) {
        const uint64_t counter = static_cast<uint64_t>(sample[r] * full + d.column_offset + c);
        const bool keep = static_cast<double>(philox_word(d.seed, d.offset, counter)) < (1 - d.p) * 4294967296.0;
        y[r * x.width + c] = keep ? x.row(r)[c] / (1 - d.p) : 0.0;
      }
    return TensorList{f64_tensor(y, in[0].sizes())};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto rows_of = [&](int64_t rows, int64_t high) {
      return Tensor::from_vector(random_indices(rows, high, gen), {rows});
    };
    auto attrs = [](double p, int64_t seed, int64_t offset = 0, int64_t column_offset = 0, int64_t full_width = -1) {
      return Attributes{
          {"p", p}, {"seed", seed}, {"offset", offset}, {"column_offset", column_offset}, {"full_width", full_width}};
    };
    return std::vector<OpSample>{
        {"p 0.3 over [6, 10]", {uniform_tensor({6, 10}, dtype, gen), rows_of(6, 1000)}, attrs(0.3, 17)},
        {"shard columns [5, 42) of 50, p 0.5",
         {uniform_tensor({4, 37}, dtype, gen), rows_of(4, 100)},
         attrs(0.5, 3, 9, 5, 50)},
        {"3-d [2, 3, 8], p 0.1", {uniform_tensor({2, 3, 8}, dtype, gen), rows_of(6, 1 << 20)}, attrs(0.1, 5, 2)},
        {"non-contiguous [5, 6]", {non_contiguous(uniform_tensor({5, 6}, dtype, gen)), rows_of(5, 10)}, attrs(0.25, 8)},
        {"p 0 keeps everything", {uniform_tensor({3, 4}, dtype, gen), rows_of(3, 10)}, attrs(0.0, 1)},
        {"p 1 drops everything", {uniform_tensor({3, 4}, dtype, gen), rows_of(3, 10)}, attrs(1.0, 1)},
        {"threaded [64, 700]", {uniform_tensor({64, 700}, dtype, gen), rows_of(64, 1 << 30)}, attrs(0.2, 99, 4)}};
  };
  info.error_cases = [] {
    const Tensor x = Tensor::zeros({4, 6});
    const Tensor rows = Tensor::from_vector<int64_t>({0, 1, 2, 3});
    auto attrs = [](double p, int64_t column_offset = 0, int64_t full_width = -1) {
      return Attributes{{"p", p}, {"seed", int64_t{1}}, {"column_offset", column_offset}, {"full_width", full_width}};
    };
    return std::vector<OpErrorCase>{
        {"p above 1", {x, rows}, attrs(1.5), "dropout: p must be a probability in [0, 1], got 1.5"},
        {"one sample index short",
         {x, Tensor::from_vector<int64_t>({0, 1, 2})},
         attrs(0.1),
         "dropout: sample_index must be an i64 vector with one global index per row of x, i.e. shape [4] for x of "
         "shape [4, 6], got Tensor[i64, cpu, [3]]"},
        {"shard past full_width",
         {x, rows},
         attrs(0.1, 5, 10),
         "dropout: the shard's columns [5, 11) do not fit in full_width 10"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const DropoutArgs d(ctx.attrs);
    return TensorList{
        dropout_backward(ctx.grad_outputs[0], d.p, d.seed, d.offset, ctx.inputs[1], d.column_offset, d.full_width),
        Tensor()};
  };
  info.nondifferentiable_inputs = {1};
  info.tolerance = nn_tolerance;
  return info;
}

// --- causal_attention ---

// The options an entry's attributes and optional fourth input (the padding mask) give.
AttentionOptions attention_options(const TensorList& in, const Attributes& a) {
  AttentionOptions options;
  if (a.has("scale")) options.scale = a.get_double("scale");
  options.window = a.get_int("window", 0);
  if (in.size() > 3) options.key_padding_mask = in[3];
  return options;
}

OpInfo attention_entry() {
  OpInfo info;
  info.name = "causal_attention";
  // q kᵀ and p v, each (B·NH·Tq)·Tk·HS MACs counted whole (the masked part too, as DeepSpeed
  // counts the two matmuls of an unfused attention), plus the softmax's B·NH·Tq·Tk flops.
  info.cost = [](const TensorList& in, const TensorList&, const Attributes&) {
    const int64_t keys = in[1].size(-2), rows = in[0].numel() / in[0].size(-1);
    const int64_t macs = 2 * in[0].numel() * keys;
    return OpCost{macs, 2 * macs + rows * keys};
  };
  info.dtypes = kFloatTypes;
  info.run = [](const TensorList& in, const Attributes& a) {
    AttentionOutputs r = causal_attention(in[0], in[1], in[2], attention_options(in, a));
    return TensorList{r.out, r.lse};
  };
  // The naive way: a full score row per query over the keys it sees, softmaxed, times v.
  info.reference = [](const TensorList& in, const Attributes& a) {
    const int64_t B = in[0].size(0), NH = in[0].size(1), Tq = in[0].size(2), HS = in[0].size(3);
    const int64_t NKV = in[1].size(1), Tk = in[1].size(2), offset = Tk - Tq, window = a.get_int("window", 0);
    const double scale = a.has("scale") ? a.get_double("scale") : 1 / std::sqrt(static_cast<double>(HS));
    const std::vector<double> q = in[0].to_vector<double>(), k = in[1].to_vector<double>(),
                              v = in[2].to_vector<double>();
    const std::vector<int64_t> keep = in.size() > 3 ? in[3].to_vector<int64_t>() : std::vector<int64_t>(B * Tk, 1);
    std::vector<double> out(q.size(), 0.0), lse(B * NH * Tq), s;
    std::vector<int64_t> seen;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        const int64_t row0 = (b * NH + h) * Tq, kv0 = (b * NKV + h / (NH / NKV)) * Tk;
        for (int64_t i = 0; i < Tq; ++i) {
          s.clear();
          seen.clear();
          for (int64_t j = 0; j <= i + offset; ++j) {
            if ((window > 0 && j <= i + offset - window) || keep[b * Tk + j] == 0) continue;
            double dot = 0;
            for (int64_t d = 0; d < HS; ++d) dot += q[(row0 + i) * HS + d] * k[(kv0 + j) * HS + d];
            s.push_back(dot * scale);
            seen.push_back(j);
          }
          const double row_lse = s.empty() ? -std::numeric_limits<double>::infinity()
                                           : row_logsumexp(s.data(), static_cast<int64_t>(s.size()));
          lse[row0 + i] = row_lse;
          for (size_t n = 0; n < seen.size(); ++n)
            for (int64_t d = 0; d < HS; ++d)
              out[(row0 + i) * HS + d] += std::exp(s[n] - row_lse) * v[(kv0 + seen[n]) * HS + d];
        }
      }
    return TensorList{f64_tensor(out, in[0].sizes()), f64_tensor(lse, without_last(in[0].sizes()))};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto qkv = [&](const Shape& q_shape, int64_t NKV = 0, int64_t Tk = 0) {
      Shape kv_shape = q_shape;
      if (NKV > 0) kv_shape[1] = NKV;
      if (Tk > 0) kv_shape[2] = Tk;
      return TensorList{uniform_tensor(q_shape, dtype, gen, -1.5, 1.5), uniform_tensor(kv_shape, dtype, gen, -1.5, 1.5),
                        uniform_tensor(kv_shape, dtype, gen, -1.5, 1.5)};
    };
    auto with_mask = [](TensorList inputs, std::vector<int64_t> keep, DType mask_dtype) {
      const int64_t B = inputs[0].size(0);
      inputs.push_back(Tensor::from_vector(keep, {static_cast<int64_t>(keep.size())})
                           .reshape({B, static_cast<int64_t>(keep.size()) / B})
                           .to(mask_dtype));
      return inputs;
    };
    // (B, T, NH, HS) storage viewed as (B, NH, T, HS): the layout a fused qkv projection gives.
    auto head_major_views = [&](int64_t B, int64_t NH, int64_t T, int64_t HS) {
      TensorList views;
      for (int i = 0; i < 3; ++i)
        views.push_back(uniform_tensor({B, T, NH, HS}, dtype, gen, -1.5, 1.5).transpose(1, 2));
      return views;
    };
    return std::vector<OpSample>{
        {"[1, 2, 5, 4]", qkv({1, 2, 5, 4}), {}},
        {"T 1 [2, 2, 1, 3]", qkv({2, 2, 1, 3}), {}},
        {"scale 0.7 [2, 1, 6, 3]", qkv({2, 1, 6, 3}), Attributes{{"scale", 0.7}}},
        {"non-contiguous (B, T, NH, HS) views [1, 2, 4, 3]", head_major_views(1, 2, 4, 3), {}},
        {"two query blocks, HS 1 [1, 1, 70, 1]", qkv({1, 1, 70, 1}), {}},
        {"T 67 [1, 1, 67, 8]", qkv({1, 1, 67, 8}), {}},
        {"grouped-query 4:2 [2, 4, 6, 3]", qkv({2, 4, 6, 3}, 2), {}},
        {"multi-query 3:1 [1, 3, 5, 4]", qkv({1, 3, 5, 4}, 1), {}},
        {"a cache: 3 queries after 4 cached keys", qkv({2, 2, 3, 4}, 1, 7), {}},
        {"sliding window 3 [1, 2, 9, 4]", qkv({1, 2, 9, 4}), Attributes{{"window", int64_t{3}}}},
        {"window 2 with a cache of 5", qkv({1, 2, 4, 3}, 2, 9), Attributes{{"window", int64_t{2}}}},
        {"right-padded keys (i64 mask)", with_mask(qkv({2, 2, 5, 3}), {1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, DType::I64), {}},
        {"left-padded (bool mask): padding queries see no key",
         with_mask(qkv({2, 2, 5, 3}, 1), {0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, DType::Bool), {}},
        {"threaded T 130 [1, 2, 130, 16]", qkv({1, 2, 130, 16}), {}},
        {"threaded GQA, window 70, T 150 [1, 4, 150, 8]", qkv({1, 4, 150, 8}, 2),
         Attributes{{"window", int64_t{70}}}}};
  };
  info.error_cases = [] {
    const Tensor q = Tensor::zeros({1, 2, 5, 4});
    return std::vector<OpErrorCase>{
        {"k of another head size",
         {q, Tensor::zeros({1, 2, 5, 3}), q},
         {},
         "causal_attention: k of shape [1, 2, 5, 3] must be (B, NKV, Tk, HS) with q's B and HS, q being [1, 2, 5, 4]"},
        {"3-d q",
         {Tensor::zeros({2, 5, 4}), Tensor::zeros({2, 5, 4}), Tensor::zeros({2, 5, 4})},
         {},
         "causal_attention: q must be (B, NH, Tq, HS), got shape [2, 5, 4]"},
        {"v of another dtype",
         {q, q, Tensor::zeros({1, 2, 5, 4}, DType::F64)},
         {},
         "causal_attention: v must have the dtype of Tensor[f32, cpu, [1, 2, 5, 4]], got Tensor[f64, cpu, [1, 2, 5, "
         "4]]"},
        {"integer q",
         {Tensor::zeros({1, 1, 2, 2}, DType::I64), q, q},
         {},
         "causal_attention: q must be a floating-point tensor (f32, f64, f16, bf16), got i64"},
        {"heads not a multiple of kv heads",
         {Tensor::zeros({1, 3, 5, 4}), q, q},
         {},
         "causal_attention: q's 3 heads must be a multiple of k's and v's 2 heads"},
        {"more queries than keys",
         {Tensor::zeros({1, 2, 6, 4}), q, q},
         {},
         "causal_attention: q has 6 positions, more than k's 5"},
        {"v unlike k",
         {q, q, Tensor::zeros({1, 1, 5, 4})},
         {},
         "causal_attention: v of shape [1, 1, 5, 4] must match k of shape [1, 2, 5, 4]"},
        {"a mask of the wrong length",
         {q, q, q, Tensor::zeros({1, 4}, DType::Bool)},
         {},
         "causal_attention: key_padding_mask must be (B, Tk) = [1, 5], got shape [1, 4]"},
        {"a float mask",
         {q, q, q, Tensor::zeros({1, 5})},
         {},
         "causal_attention: key_padding_mask must be bool, i32 or i64 (1 = a real key, 0 = padding)"},
        {"a negative window", {q, q, q}, Attributes{{"window", int64_t{-1}}},
         "causal_attention: window must be >= 0 (0: no sliding window), got -1"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const AttentionGrads g = causal_attention_backward(
        ctx.grad_outputs[0], ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.outputs[0], ctx.outputs[1],
        attention_options(ctx.inputs, ctx.attrs), Tensor(), ctx.needs_input_grad[0], ctx.needs_input_grad[1],
        ctx.needs_input_grad[2]);
    TensorList grads{g.dq, g.dk, g.dv};
    grads.resize(ctx.inputs.size());  // none for the mask
    return grads;
  };
  info.nondifferentiable_inputs = {3};
  info.gradient_uses_outputs = true;
  info.tolerance = nn_tolerance;
  info.has_cuda = true;
  return info;
}

}  // namespace

void register_nn_ops(std::vector<OpInfo>& registry) {
  registry.push_back(softmax_entry(/*log=*/false));
  registry.push_back(softmax_entry(/*log=*/true));
  registry.push_back(causal_softmax_entry());
  registry.push_back(layernorm_entry());
  registry.push_back(rmsnorm_entry());
  registry.push_back(embedding_entry());
  registry.push_back(cross_entropy_entry());
  registry.push_back(dropout_entry());
  registry.push_back(attention_entry());
}

}  // namespace fathom
