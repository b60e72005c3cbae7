// Op-registry entries of the fused optimizer kernels and the overflow check. The sample dtype
// is the dtype of the 16-bit parameter copy written in the same pass (f32: no copy).
#include <cmath>

#include "kernels/op_registry.h"
#include "kernels/op_samples.h"
#include "kernels/optimizer_kernels.h"

namespace fathom {
namespace {

using samples::uniform_tensor;

AdamHyper adam_hyper(const Attributes& a) {
  AdamHyper h;
  h.lr = a.get_double("lr");
  h.beta1 = a.get_double("beta1");
  h.beta2 = a.get_double("beta2");
  h.eps = a.get_double("eps");
  h.weight_decay = a.get_double("weight_decay");
  h.step = a.get_int("step");
  h.adam_w_mode = a.get_bool("adam_w_mode");
  h.bias_correction = a.get_bool("bias_correction");
  return h;
}

SgdHyper sgd_hyper(const Attributes& a) {
  SgdHyper h;
  h.lr = a.get_double("lr");
  h.momentum = a.get_double("momentum");
  h.dampening = a.get_double("dampening");
  h.weight_decay = a.get_double("weight_decay");
  h.nesterov = a.get_bool("nesterov");
  h.first_step = a.get_bool("first_step");
  return h;
}

// The op updates its inputs in place; the registry's run works on copies and returns them.
TensorList clone_all(const TensorList& in) {
  TensorList out;
  for (const Tensor& t : in) out.push_back(t.defined() ? t.clone() : t);
  return out;
}

// Drops the grads (input 1) and an absent parameter copy: what remains is the updated state.
TensorList updated_state(TensorList tensors) {
  tensors.erase(tensors.begin() + 1);
  if (!tensors.back().defined()) tensors.pop_back();
  return tensors;
}

Tensor copy_like(const Tensor& params, DType dtype) {
  return dtype == DType::F32 ? Tensor() : Tensor::full(params.sizes(), std::nan(""), dtype);  // poisoned
}

// The flops profiler counts the forward pass; optimizer steps and the overflow check run outside it.
OpCost not_profiled(const TensorList&, const TensorList&, const Attributes&) { return {}; }

OpInfo adam_entry() {
  OpInfo info;
  info.name = "adam_step";
  info.cost = not_profiled;
  info.dtypes = {DType::F32, DType::BF16, DType::F16};
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    TensorList s = clone_all(in);
    adam_step(s[0], s[1], s[2], s[3], adam_hyper(a), s.size() > 4 ? s[4] : Tensor());
    return updated_state(s);  // {params, exp_avg, exp_avg_sq, copy?}
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const AdamHyper h = adam_hyper(a);
    auto p = in[0].to_vector<double>(), g = in[1].to_vector<double>();
    auto m = in[2].to_vector<double>(), v = in[3].to_vector<double>();
    const double bc1 = h.bias_correction ? 1 - std::pow(h.beta1, h.step) : 1;
    const double bc2 = h.bias_correction ? 1 - std::pow(h.beta2, h.step) : 1;
    for (size_t i = 0; i < p.size(); ++i) {
      const double grad = h.adam_w_mode ? g[i] : g[i] + h.weight_decay * p[i];
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * grad;
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * grad * grad;
      double update = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + h.eps);
      if (h.adam_w_mode) update += h.weight_decay * p[i];
      p[i] -= h.lr * update;
    }
    const Shape shape = in[0].sizes();
    TensorList out = {Tensor::from_vector(p, shape), Tensor::from_vector(m, shape), Tensor::from_vector(v, shape)};
    if (in.size() > 4 && in[4].defined()) out.push_back(out[0]);
    return out;
  };
  info.samples = [](DType dtype, Generator& gen) {
    std::vector<OpSample> out;
    for (const auto& [n, adam_w, bias_correction, step] :
         {std::tuple{int64_t{1001}, true, true, int64_t{1}}, std::tuple{int64_t{40000}, true, true, int64_t{10}},
          std::tuple{int64_t{333}, false, true, int64_t{3}}, std::tuple{int64_t{77}, true, false, int64_t{2}}}) {
      const Tensor params = uniform_tensor({n}, DType::F32, gen, -1, 1);
      const Tensor exp_avg = uniform_tensor({n}, DType::F32, gen, -0.1, 0.1);
      const Tensor exp_avg_sq = uniform_tensor({n}, DType::F32, gen, 0, 0.01);
      const Attributes attrs{{"lr", 1e-2}, {"beta1", 0.9}, {"beta2", 0.95}, {"eps", 1e-8},
                             {"weight_decay", 0.1}, {"step", step}, {"adam_w_mode", adam_w},
                             {"bias_correction", bias_correction}};
      out.push_back({"n " + std::to_string(n) + (adam_w ? " adamw" : " adam+L2") +
                         (bias_correction ? "" : " no bias correction"),
                     {params, uniform_tensor({n}, DType::F32, gen, -1, 1), exp_avg, exp_avg_sq, copy_like(params, dtype)},
                     attrs});
    }
    return out;
  };
  info.error_cases = [] {
    const Attributes ok{{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0},
                        {"step", int64_t{1}}, {"adam_w_mode", true}, {"bias_correction", true}};
    Attributes bad_beta = ok;
    bad_beta.set("beta2", 1.0);
    Attributes step0 = ok;
    step0.set("step", int64_t{0});
    const Tensor p = Tensor::zeros({4});
    return std::vector<OpErrorCase>{
        {"numel mismatch", {p, Tensor::zeros({5}), p, p}, ok, "adam_step: grads has 5 elements but params has 4"},
        {"16-bit master", {p.to(DType::F16), p, p, p}, ok, "adam_step: params must be f32"},
        {"bf16 gradients", {p, p.to(DType::BF16), p, p}, ok, "adam_step: grads must be f32"},
        {"beta2 = 1", {p, p, p, p}, bad_beta, "adam_step: betas must be in [0, 1), got (0.9, 1)"},
        {"step 0", {p, p, p, p}, step0, "adam_step: step counts from 1, got 0"},
        {"i32 copy", {p, p, p, p, Tensor::zeros({4}, DType::I32)}, ok,
         "adam_step: the parameter copy must be bf16, f16 or f32, got i32"}};
  };
  info.tolerance = [](DType dtype) { return dtype == DType::F32 ? Tolerance{1e-6, 1e-5} : default_tolerance(dtype); };
  return info;
}

OpInfo sgd_entry() {
  OpInfo info;
  info.name = "sgd_step";
  info.cost = not_profiled;
  info.dtypes = {DType::F32, DType::BF16};
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    TensorList s = clone_all(in);
    sgd_step(s[0], s[1], s[2], sgd_hyper(a), s.size() > 3 ? s[3] : Tensor());
    return updated_state(s);  // {params, momentum_buffer, copy?}
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const SgdHyper h = sgd_hyper(a);
    auto p = in[0].to_vector<double>(), g = in[1].to_vector<double>(), b = in[2].to_vector<double>();
    for (size_t i = 0; i < p.size(); ++i) {
      double grad = g[i] + h.weight_decay * p[i];
      if (h.momentum != 0) {
        b[i] = h.first_step ? grad : h.momentum * b[i] + (1 - h.dampening) * grad;
        grad = h.nesterov ? grad + h.momentum * b[i] : b[i];
      }
      p[i] -= h.lr * grad;
    }
    TensorList out = {Tensor::from_vector(p, in[0].sizes()), Tensor::from_vector(b, in[0].sizes())};
    if (in.size() > 3 && in[3].defined()) out.push_back(out[0]);
    return out;
  };
  info.samples = [](DType dtype, Generator& gen) {
    std::vector<OpSample> out;
    for (const auto& [momentum, nesterov, first] :
         {std::tuple{0.9, false, true}, std::tuple{0.9, true, false}, std::tuple{0.9, false, false}}) {
      const int64_t n = 40003;
      const Tensor params = uniform_tensor({n}, DType::F32, gen, -1, 1);
      out.push_back({std::string(nesterov ? "nesterov" : "momentum") + (first ? ", first step" : ""),
                     {params, uniform_tensor({n}, DType::F32, gen, -1, 1), uniform_tensor({n}, DType::F32, gen, -1, 1),
                      copy_like(params, dtype)},
                     Attributes{{"lr", 0.05}, {"momentum", momentum}, {"dampening", 0.0}, {"weight_decay", 1e-2},
                                {"nesterov", nesterov}, {"first_step", first}}});
    }
    return out;
  };
  info.error_cases = [] {
    const Attributes nesterov_damped{{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.1}, {"weight_decay", 0.0},
                                     {"nesterov", true}, {"first_step", false}};
    const Attributes plain{{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.0}, {"weight_decay", 0.0},
                           {"nesterov", false}, {"first_step", false}};
    const Tensor p = Tensor::zeros({4});
    return std::vector<OpErrorCase>{
        {"nesterov with dampening", {p, p, p}, nesterov_damped,
         "sgd_step: nesterov momentum needs momentum > 0 and dampening = 0"},
        {"missing momentum buffer", {p, p, Tensor()}, plain, "sgd_step: momentum_buffer is undefined"}};
  };
  info.tolerance = [](DType dtype) { return dtype == DType::F32 ? Tolerance{1e-6, 1e-5} : default_tolerance(dtype); };
  return info;
}

OpInfo overflow_check_entry() {
  OpInfo info;
  info.name = "has_inf_or_nan";
  info.cost = not_profiled;
  info.dtypes = {DType::F32, DType::F64, DType::BF16, DType::F16};
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes&) {
    const Device device = in.empty() || !in[0].defined() ? kCPU : in[0].device();  // beside the inputs
    return TensorList{Tensor::scalar(has_inf_or_nan(in) ? 1.0 : 0.0, DType::Bool, device)};
  };
  info.reference = [](const TensorList& in, const Attributes&) {
    bool found = false;
    for (const Tensor& t : in)
      for (double v : t.to_vector<double>()) found = found || !std::isfinite(v);
    return TensorList{Tensor::scalar(found ? 1.0 : 0.0, DType::Bool)};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto with = [&](int64_t n, int64_t at, double value) {
      Tensor t = uniform_tensor({n}, dtype, gen, -1e3, 1e3);
      if (at >= 0) t.narrow(0, at, 1).fill_(value);
      return t;
    };
    const double inf = std::numeric_limits<double>::infinity();
    return std::vector<OpSample>{
        {"finite", {with(50000, -1, 0), with(17, -1, 0)}, {}},
        {"NaN at the very end", {with(17, -1, 0), with(50001, 50000, std::nan(""))}, {}},
        {"-Inf in the middle", {with(40000, 20000, -inf)}, {}},
        {"Inf in a non-contiguous view", {samples::non_contiguous(with(99, 50, inf))}, {}}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{{"integer tensor", {Tensor::zeros({3}, DType::I32)}, {},
                                     "has_inf_or_nan: needs a floating-point tensor, got i32"}};
  };
  info.tolerance = default_tolerance;
  return info;
}

}  // namespace

void register_optimizer_ops(std::vector<OpInfo>& registry) {
  registry.push_back(adam_entry());
  registry.push_back(sgd_entry());
  registry.push_back(overflow_check_entry());
}

}  // namespace fathom
