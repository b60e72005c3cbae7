// Op-registry entries of the elementwise ops: every UnaryOp and BinaryOp, where, and the
// in-place forms, each with an f64 reference, samples, error cases and its gradient.
#include <cmath>

#include "kernels/elementwise.h"
#include "kernels/op_registry.h"
#include "kernels/op_samples.h"
#include "kernels/reduction.h"

namespace fathom {
namespace {

using samples::non_contiguous;
using samples::uniform_tensor;

const std::vector<DType> kFloatTypes = {DType::F32, DType::F64, DType::BF16, DType::F16};
const std::vector<DType> kAllNumeric = {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32, DType::I64};

double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_erf_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_tanh_grad_ref(double x) {
  const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}
double gelu_erf_grad_ref(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

struct UnarySpec {
  UnaryOp op;
  double low, high;  // sample range (inside the domain, away from kinks)
  double alpha, beta;
  std::function<double(double x, double alpha, double beta)> reference;
  // grad_input from (grad, x, y); empty for none
  std::function<Tensor(const Tensor& g, const Tensor& x, const Tensor& y, double alpha, double beta)> gradient;
  bool float_only = true;
};

// What each unary gradient reads: its input x, its output y, or neither (autograd saves
// exactly that, so e.g. exp keeps only its output).
struct UnaryNeeds {
  bool x, y;
};
UnaryNeeds gradient_needs(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp: case UnaryOp::Sqrt: case UnaryOp::Rsqrt: case UnaryOp::Tanh: case UnaryOp::Sigmoid:
    case UnaryOp::Relu:
      return {false, true};
    case UnaryOp::Abs: case UnaryOp::Log: case UnaryOp::GeluTanh: case UnaryOp::GeluErf: case UnaryOp::Silu:
    case UnaryOp::PowScalar: case UnaryOp::Clamp:
      return {true, false};
    default:
      return {false, false};
  }
}

std::vector<UnarySpec> unary_specs() {
  const double alpha = 1.75, lo = -0.5, hi = 0.75;  // the scalars float samples use
  return {
      {UnaryOp::Neg, -3, 3, 0, 0, [](double x, double, double) { return -x; },
       [](const Tensor& g, const Tensor&, const Tensor&, double, double) { return neg(g); }, false},
      {UnaryOp::Abs, -3, 3, 0, 0, [](double x, double, double) { return std::fabs(x); },
       [](const Tensor& g, const Tensor& x, const Tensor&, double, double) {
         return where(lt(x, Tensor::zeros({}, x.dtype(), x.device())), neg(g), g);
       }, false},
      {UnaryOp::Exp, -4, 4, 0, 0, [](double x, double, double) { return std::exp(x); },
       [](const Tensor& g, const Tensor&, const Tensor& y, double, double) { return mul(g, y); }},
      {UnaryOp::Log, 0.1, 4, 0, 0, [](double x, double, double) { return std::log(x); },
       [](const Tensor& g, const Tensor& x, const Tensor&, double, double) { return div(g, x); }},
      {UnaryOp::Sqrt, 0.1, 4, 0, 0, [](double x, double, double) { return std::sqrt(x); },
       [](const Tensor& g, const Tensor&, const Tensor& y, double, double) { return div(mul(g, 0.5), y); }},
      {UnaryOp::Rsqrt, 0.1, 4, 0, 0, [](double x, double, double) { return 1 / std::sqrt(x); },
       [](const Tensor& g, const Tensor&, const Tensor& y, double, double) { return mul(mul(g, mul(y, mul(y, y))), -0.5); }},
      {UnaryOp::Tanh, -4, 4, 0, 0, [](double x, double, double) { return std::tanh(x); },
       [](const Tensor& g, const Tensor&, const Tensor& y, double, double) { return tanh_backward(g, y); }},
      {UnaryOp::Sigmoid, -6, 6, 0, 0, [](double x, double, double) { return sigmoid_ref(x); },
       [](const Tensor& g, const Tensor&, const Tensor& y, double, double) { return sigmoid_backward(g, y); }},
      {UnaryOp::Relu, -3, 3, 0, 0, [](double x, double, double) { return x > 0 ? x : 0.0; },
       [](const Tensor& g, const Tensor&, const Tensor& y, double, double) { return relu_backward(g, y); }, false},
      {UnaryOp::GeluTanh, -4, 4, 0, 0, [](double x, double, double) { return gelu_tanh_ref(x); },
       [](const Tensor& g, const Tensor& x, const Tensor&, double, double) { return gelu_backward(g, x, GeluApproximation::Tanh); }},
      {UnaryOp::GeluErf, -4, 4, 0, 0, [](double x, double, double) { return gelu_erf_ref(x); },
       [](const Tensor& g, const Tensor& x, const Tensor&, double, double) { return gelu_backward(g, x, GeluApproximation::None); }},
      {UnaryOp::Silu, -6, 6, 0, 0, [](double x, double, double) { return x * sigmoid_ref(x); },
       [](const Tensor& g, const Tensor& x, const Tensor&, double, double) { return silu_backward(g, x); }},
      {UnaryOp::AddScalar, -3, 3, alpha, 0, [](double x, double a, double) { return x + a; },
       [](const Tensor& g, const Tensor&, const Tensor&, double, double) { return g; }, false},
      {UnaryOp::MulScalar, -3, 3, alpha, 0, [](double x, double a, double) { return x * a; },
       [](const Tensor& g, const Tensor&, const Tensor&, double a, double) { return mul(g, a); }, false},
      {UnaryOp::DivScalar, -3, 3, alpha, 0, [](double x, double a, double) { return x / a; },
       [](const Tensor& g, const Tensor&, const Tensor&, double a, double) { return div(g, a); }},
      {UnaryOp::RsubScalar, -3, 3, alpha, 0, [](double x, double a, double) { return a - x; },
       [](const Tensor& g, const Tensor&, const Tensor&, double, double) { return neg(g); }, false},
      {UnaryOp::PowScalar, 0.2, 3, alpha, 0, [](double x, double a, double) { return std::pow(x, a); },
       [](const Tensor& g, const Tensor& x, const Tensor&, double a, double) { return mul(mul(g, pow(x, a - 1)), a); }},
      {UnaryOp::Clamp, -2, 2, lo, hi, [](double x, double a, double b) { return std::min(std::max(x, a), b); },
       [](const Tensor& g, const Tensor& x, const Tensor&, double a, double b) {
         // Two selects rather than a bool `and`: where() on bool values has no CUDA kernel.
         const Device d = x.device();
         const Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
         return where(ge(x, Tensor::scalar(a, x.dtype(), d)), where(le(x, Tensor::scalar(b, x.dtype(), d)), g, zero),
                      zero);
       }, false},
  };
}

// Shapes every elementwise op is sampled on: plain, odd-sized (beyond a vector width and the
// threading grain), non-contiguous, 0-d and empty.
std::vector<OpSample> unary_samples(DType dtype, Generator& gen, double low, double high, const Attributes& attrs) {
  std::vector<OpSample> out;
  out.push_back({"[5, 7]", {uniform_tensor({5, 7}, dtype, gen, low, high)}, attrs});
  out.push_back({"odd [37]", {uniform_tensor({37}, dtype, gen, low, high)}, attrs});
  out.push_back({"non-contiguous [3, 4, 5]", {non_contiguous(uniform_tensor({3, 4, 5}, dtype, gen, low, high))}, attrs});
  out.push_back({"0-d", {uniform_tensor({}, dtype, gen, low, high)}, attrs});
  out.push_back({"empty [0, 3]", {uniform_tensor({0, 3}, dtype, gen, low, high)}, attrs});
  out.push_back({"large [40000] (threaded)", {uniform_tensor({40000}, dtype, gen, low, high)}, attrs});
  return out;
}

void add_unary_ops(std::vector<OpInfo>& registry) {
  for (const UnarySpec& spec : unary_specs()) {
    OpInfo info;
    info.name = op_name(spec.op);
    info.dtypes = spec.float_only ? kFloatTypes : kAllNumeric;
    const UnaryOp op = spec.op;
    info.run = [op](const TensorList& in, const Attributes& attrs) {
      return TensorList{unary(op, in[0], attrs.get_double("alpha", 0), attrs.get_double("beta", 0))};
    };
    auto reference = spec.reference;
    info.reference = [reference](const TensorList& in, const Attributes& a) {
      const double alpha = a.get_double("alpha"), beta = a.get_double("beta");
      return TensorList{samples::map_f64(in[0], [&](double x) { return reference(x, alpha, beta); })};
    };
    const Attributes attrs{{"alpha", spec.alpha}, {"beta", spec.beta}};
    // Integer tensors take integral scalars: the same op with rounded scalars and values.
    const Attributes integer_attrs{{"alpha", std::round(spec.alpha)}, {"beta", std::round(spec.beta)}};
    const double low = spec.low, high = spec.high;
    info.samples = [=](DType dtype, Generator& gen) {
      if (is_floating_point(dtype)) return unary_samples(dtype, gen, low, high, attrs);
      return unary_samples(dtype, gen, -20, 20, integer_attrs);
    };
    const std::string name = info.name;
    const bool float_only = spec.float_only;
    info.error_cases = [name, float_only, attrs] {
      std::vector<OpErrorCase> cases = {
          {"bool input", {Tensor::zeros({3}, DType::Bool)}, attrs, name + ": bool tensors are not supported"}};
      if (float_only)
        cases.push_back({"integer input", {Tensor::zeros({3}, DType::I64)}, attrs,
                         name + ": needs a floating-point tensor, got i64"});
      return cases;
    };
    auto gradient = spec.gradient;
    info.gradient = [gradient](const GradientContext& ctx) {
      return TensorList{gradient(ctx.grad_outputs[0], ctx.inputs[0], ctx.outputs[0], ctx.attrs.get_double("alpha", 0),
                                 ctx.attrs.get_double("beta", 0))};
    };
    info.gradient_uses_inputs = gradient_needs(spec.op).x;
    info.gradient_uses_outputs = gradient_needs(spec.op).y;
    info.tolerance = [](DType dtype) {
      Tolerance t = default_tolerance(dtype);
      if (dtype == DType::F32) t = {2e-6, 4e-6};  // own exp/tanh approximations: ~2 ulp
      return t;
    };
    info.has_cuda = true;
    info.cost = per_output_element;
    registry.push_back(std::move(info));
  }
}

struct BinarySpec {
  BinaryOp op;
  double low_a, high_a, low_b, high_b;
  std::function<double(double, double)> reference;
  // {grad_a, grad_b} at the broadcast shape; empty for comparisons
  std::function<TensorList(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& y)> gradient;
  bool float_only = false;
};

std::vector<BinarySpec> binary_specs() {
  const auto none = std::function<TensorList(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>();
  auto compare = [](BinaryOp op, std::function<bool(double, double)> f) {
    return BinarySpec{op, -2, 2, -2, 2, [f](double a, double b) { return f(a, b) ? 1.0 : 0.0; }, {}, false};
  };
  auto backward_op = [](BinaryOp op, double low, double high, std::function<double(double)> derivative) {
    return BinarySpec{op, -2, 2, low, high, [derivative](double g, double s) { return g * derivative(s); }, {}, true};
  };
  return {
      {BinaryOp::Add, -3, 3, -3, 3, [](double a, double b) { return a + b; },
       [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) { return TensorList{g, g}; }},
      {BinaryOp::Sub, -3, 3, -3, 3, [](double a, double b) { return a - b; },
       [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&) { return TensorList{g, neg(g)}; }},
      {BinaryOp::Mul, -3, 3, -3, 3, [](double a, double b) { return a * b; },
       [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&) { return TensorList{mul(g, b), mul(g, a)}; }},
      {BinaryOp::Div, -3, 3, 0.5, 3, [](double a, double b) { return a / b; },
       [](const Tensor& g, const Tensor&, const Tensor& b, const Tensor& y) {
         return TensorList{div(g, b), neg(div(mul(g, y), b))};
       }, true},
      {BinaryOp::Pow, 0.2, 3, -2, 2, [](double a, double b) { return std::pow(a, b); },
       [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& y) {
         return TensorList{mul(g, mul(b, pow(a, sub(b, 1.0)))), mul(g, mul(y, log(a)))};
       }, true},
      {BinaryOp::Maximum, -3, 3, -3, 3, [](double a, double b) { return std::max(a, b); },
       [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&) {
         const Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
         const Tensor a_wins = ge(a, b);
         return TensorList{where(a_wins, g, zero), where(a_wins, zero, g)};
       }},
      {BinaryOp::Minimum, -3, 3, -3, 3, [](double a, double b) { return std::min(a, b); },
       [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&) {
         const Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
         const Tensor a_wins = le(a, b);
         return TensorList{where(a_wins, g, zero), where(a_wins, zero, g)};
       }},
      compare(BinaryOp::Eq, [](double a, double b) { return a == b; }),
      compare(BinaryOp::Ne, [](double a, double b) { return a != b; }),
      compare(BinaryOp::Lt, [](double a, double b) { return a < b; }),
      compare(BinaryOp::Le, [](double a, double b) { return a <= b; }),
      compare(BinaryOp::Gt, [](double a, double b) { return a > b; }),
      compare(BinaryOp::Ge, [](double a, double b) { return a >= b; }),
      backward_op(BinaryOp::ReluBackward, -2, 2, [](double y) { return y > 0 ? 1.0 : 0.0; }),
      backward_op(BinaryOp::GeluTanhBackward, -4, 4, gelu_tanh_grad_ref),
      backward_op(BinaryOp::GeluErfBackward, -4, 4, gelu_erf_grad_ref),
      backward_op(BinaryOp::SiluBackward, -6, 6,
                  [](double x) { const double s = sigmoid_ref(x); return s * (1 + x * (1 - s)); }),
      backward_op(BinaryOp::SigmoidBackward, 0.01, 0.99, [](double y) { return y * (1 - y); }),
      backward_op(BinaryOp::TanhBackward, -0.99, 0.99, [](double y) { return 1 - y * y; }),
      // d/dgate = g · up · silu'(gate), d/dup = g · silu(gate).
      {BinaryOp::SwiGlu, -6, 6, -3, 3, [](double gate, double up) { return gate * sigmoid_ref(gate) * up; },
       [](const Tensor& g, const Tensor& gate, const Tensor& up, const Tensor&) {
         return TensorList{silu_backward(mul(g, up), gate), mul(g, silu(gate))};
       }, true},
  };
}

std::vector<OpSample> binary_samples(DType dtype, Generator& gen, const BinarySpec& s) {
  auto a = [&](const Shape& shape) { return uniform_tensor(shape, dtype, gen, s.low_a, s.high_a); };
  auto b = [&](const Shape& shape) { return uniform_tensor(shape, dtype, gen, s.low_b, s.high_b); };
  std::vector<OpSample> out;
  out.push_back({"[5, 7] . [5, 7]", {a({5, 7}), b({5, 7})}, {}});
  out.push_back({"broadcast [3, 1, 4] . [5, 1]", {a({3, 1, 4}), b({5, 1})}, {}});
  out.push_back({"broadcast [6] . [4, 6]", {a({6}), b({4, 6})}, {}});
  out.push_back({"non-contiguous [4, 5] . transposed", {non_contiguous(a({4, 5})), non_contiguous(b({4, 5}))}, {}});
  out.push_back({"0-d . [3]", {a({}), b({3})}, {}});
  out.push_back({"empty [0, 2] . [2]", {a({0, 2}), b({2})}, {}});
  out.push_back({"large [40000] . [40000] (threaded)", {a({40000}), b({40000})}, {}});
  if (dtype == DType::I32 || dtype == DType::I64) {  // integers: round the samples to whole numbers
    for (OpSample& sample : out)
      for (Tensor& t : sample.inputs) t = uniform_tensor(t.sizes(), DType::F64, gen, -50, 50).to(dtype);
  }
  return out;
}

void add_binary_ops(std::vector<OpInfo>& registry) {
  for (const BinarySpec& spec : binary_specs()) {
    OpInfo info;
    info.name = op_name(spec.op);
    const BinaryOp op = spec.op;
    info.dtypes = spec.float_only ? kFloatTypes : kAllNumeric;
    info.run = [op](const TensorList& in, const Attributes&) { return TensorList{binary(op, in[0], in[1])}; };
    auto reference = spec.reference;
    info.reference = [reference, op](const TensorList& in, const Attributes&) {
      Tensor out = samples::zip_f64(in[0], in[1], reference);
      return TensorList{is_comparison(op) ? out.to(DType::Bool) : out};
    };
    const BinarySpec s = spec;
    info.samples = [s](DType dtype, Generator& gen) { return binary_samples(dtype, gen, s); };
    const std::string name = info.name;
    const bool float_only = spec.float_only;
    info.error_cases = [name, float_only] {
      std::vector<OpErrorCase> cases = {
          {"shape mismatch", {Tensor::zeros({4, 64, 768}), Tensor::zeros({512, 10})}, {},
           name + ": shapes [4, 64, 768] and [512, 10] cannot be broadcast"},
          {"dtype mismatch", {Tensor::zeros({2}), Tensor::zeros({2}, DType::F64)}, {},
           name + ": expected tensors of the same dtype, got f32 and f64"},
          {"bool inputs", {Tensor::zeros({2}, DType::Bool), Tensor::zeros({2}, DType::Bool)}, {},
           name + ": bool tensors are not supported"},
          {"more than 8 dims", {Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}), Tensor::zeros({1})}, {},
           "more than 8 dims"}};
      if (float_only)
        cases.push_back({"integer inputs", {Tensor::zeros({2}, DType::I32), Tensor::zeros({2}, DType::I32)}, {},
                         name + ": needs a floating-point tensor, got i32"});
      return cases;
    };
    if (spec.gradient) {
      auto gradient = spec.gradient;
      info.gradient = [gradient](const GradientContext& ctx) {
        const TensorList full = gradient(ctx.grad_outputs[0], ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]);
        return TensorList{sum_to_shape(full[0], ctx.input_sizes[0]), sum_to_shape(full[1], ctx.input_sizes[1])};
      };
      // add/sub need only the shapes; mul/max/min the inputs; div and pow also the output.
      info.gradient_uses_inputs = op != BinaryOp::Add && op != BinaryOp::Sub;
      info.gradient_uses_outputs = op == BinaryOp::Div || op == BinaryOp::Pow;
    }
    info.tolerance = [op](DType dtype) {
      Tolerance t = default_tolerance(dtype);
      if (dtype == DType::F32 && op >= BinaryOp::ReluBackward) t = {2e-6, 4e-6};  // own exp/tanh
      if (dtype == DType::F32 && op == BinaryOp::Pow) t = {1e-6, 2e-6};
      return t;
    };
    info.has_cuda = true;
    info.cost = per_output_element;
    registry.push_back(std::move(info));
  }
}

void add_where(std::vector<OpInfo>& registry) {
  OpInfo info;
  info.name = "where";
  info.dtypes = kAllNumeric;
  info.run = [](const TensorList& in, const Attributes&) { return TensorList{where(in[0], in[1], in[2])}; };
  info.reference = [](const TensorList& in, const Attributes&) {
    const Shape shape = broadcast_shapes(broadcast_shapes(in[0].sizes(), in[1].sizes(), "where"), in[2].sizes(), "where");
    const auto c = in[0].to(DType::F64).expand(shape).to_vector<double>();
    const auto a = in[1].expand(shape).to_vector<double>();
    const auto b = in[2].expand(shape).to_vector<double>();
    std::vector<double> out(c.size());
    for (size_t i = 0; i < c.size(); ++i) out[i] = c[i] != 0 ? a[i] : b[i];
    return TensorList{Tensor::from_vector(out, {static_cast<int64_t>(out.size())}).reshape(shape)};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto cond = [&](const Shape& shape) { return bernoulli(shape, gen, 0.5, DType::Bool); };
    return std::vector<OpSample>{
        {"[4, 5] all same shape", {cond({4, 5}), uniform_tensor({4, 5}, dtype, gen), uniform_tensor({4, 5}, dtype, gen)}, {}},
        {"broadcast cond [5] over [3, 5] and 0-d", {cond({5}), uniform_tensor({3, 5}, dtype, gen), uniform_tensor({}, dtype, gen)}, {}},
        {"non-contiguous", {non_contiguous(cond({3, 4})), non_contiguous(uniform_tensor({3, 4}, dtype, gen)),
                            uniform_tensor({4}, dtype, gen)}, {}}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{
        {"float condition", {Tensor::zeros({2}), Tensor::zeros({2}), Tensor::zeros({2})}, {},
         "where: the condition must be a bool tensor, got f32"},
        {"dtype mismatch", {Tensor::zeros({2}, DType::Bool), Tensor::zeros({2}), Tensor::zeros({2}, DType::F64)}, {},
         "where: expected tensors of the same dtype, got f32 and f64"},
        {"shape mismatch", {Tensor::zeros({2}, DType::Bool), Tensor::zeros({3}), Tensor::zeros({3})}, {},
         "where: shapes [2] and [3] cannot be broadcast"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const Tensor& g = ctx.grad_outputs[0];
    const Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
    return TensorList{Tensor(), sum_to_shape(where(ctx.inputs[0], g, zero), ctx.input_sizes[1]),
                      sum_to_shape(where(ctx.inputs[0], zero, g), ctx.input_sizes[2])};
  };
  info.gradient_uses_inputs = true;
  info.nondifferentiable_inputs = {0};
  info.tolerance = default_tolerance;
  info.has_cuda = true;
  info.cost = per_output_element;
  registry.push_back(std::move(info));
}

}  // namespace

void register_elementwise_ops(std::vector<OpInfo>& registry) {
  add_unary_ops(registry);
  add_binary_ops(registry);
  add_where(registry);
}

}  // namespace fathom
