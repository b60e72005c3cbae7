// Enumerates the op registry: every op is complete, matches its f64 reference on every
// sample and dtype, rejects each bad input with its documented message, gives the same bits
// for any thread count, and has a gradient that matches central finite differences in f64.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>

#include "core/threads.h"
#include "kernels/op_registry.h"
#include "test_util.h"

using namespace fathom;

namespace {

constexpr int64_t kMaxGradcheckElements = 300;  // finite differences cost two runs per element

TensorList to_f64(const TensorList& tensors) {
  TensorList out;
  for (const Tensor& t : tensors)
    out.push_back(t.defined() && is_floating_point(t.dtype()) ? t.to(DType::F64) : t);
  return out;
}

std::string describe(const OpInfo& op, DType dtype, const std::string& sample) {
  return op.name + " [" + dtype_name(dtype) + "] " + sample;
}

// Bitwise equality of two tensors' contents (NaN-safe).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

struct ThreadCount {
  int saved = num_threads();
  ~ThreadCount() { set_num_threads(saved); }
};

}  // namespace

TEST_CASE("every registered op is complete", "[kernels]") {
  std::set<std::string> names;
  Generator gen(1);
  for (const OpInfo& op : op_registry()) {
    INFO("op " << op.name);
    CHECK(names.insert(op.name).second);  // unique names
    CHECK(!op.dtypes.empty());
    CHECK(op.run);
    CHECK(op.reference);
    CHECK(op.tolerance);
    CHECK(op.cost);
    REQUIRE(op.samples);
    REQUIRE(op.error_cases);
    CHECK(!op.error_cases().empty());
    for (DType dtype : op.dtypes) CHECK(!op.samples(dtype, gen).empty());
  }
  CHECK(names.size() >= 30);
  CHECK_THROWS_WITH(find_op("no_such_op"), Catch::Contains("no op named \"no_such_op\""));
}

TEST_CASE("ops match their f64 reference on every sample and dtype", "[kernels]") {
  for (const OpInfo& op : op_registry()) {
    for (DType dtype : op.dtypes) {
      Generator gen(42);
      const Tolerance tol = op.tolerance(dtype);
      for (const OpSample& sample : op.samples(dtype, gen)) {
        INFO(describe(op, dtype, sample.description));
        const TensorList outputs = op.run(sample.inputs, sample.attrs);
        const TensorList expected = op.reference(to_f64(sample.inputs), sample.attrs);
        REQUIRE(outputs.size() >= expected.size());
        for (size_t k = 0; k < expected.size(); ++k) {
          INFO("output " << k);
          CHECK(fathom::testing::mismatch(outputs[k], expected[k], tol.atol, tol.rtol) == "");
        }
      }
    }
  }
}

TEST_CASE("ops reject bad inputs with the documented message", "[kernels]") {
  for (const OpInfo& op : op_registry()) {
    for (const OpErrorCase& bad : op.error_cases()) {
      INFO(op.name << ": " << bad.description);
      CHECK_THROWS_WITH(op.run(bad.inputs, bad.attrs), Catch::Contains(bad.expected_message));
    }
  }
}

TEST_CASE("ops give the same bits for any thread count", "[kernels]") {
  ThreadCount restore;
  for (const OpInfo& op : op_registry()) {
    for (DType dtype : op.dtypes) {
      Generator gen(7);
      for (const OpSample& sample : op.samples(dtype, gen)) {
        INFO(describe(op, dtype, sample.description));
        set_num_threads(1);
        const TensorList single = op.run(sample.inputs, sample.attrs);
        for (int threads : {2, 3}) {
          set_num_threads(threads);
          const TensorList multi = op.run(sample.inputs, sample.attrs);
          for (size_t k = 0; k < single.size(); ++k) CHECK(same_bits(single[k], multi[k]));
        }
      }
    }
  }
}

TEST_CASE("op gradients match central finite differences in f64", "[kernels]") {
  for (const OpInfo& op : op_registry()) {
    if (!op.gradient) continue;
    Generator gen(11);
    for (const OpSample& sample : op.samples(DType::F64, gen)) {
      int64_t total = 0;
      for (const Tensor& t : sample.inputs) total += t.numel();
      if (total > kMaxGradcheckElements || total == 0) continue;
      INFO(describe(op, DType::F64, sample.description));

      const TensorList outputs = op.run(sample.inputs, sample.attrs);
      GradientContext ctx;
      ctx.attrs = sample.attrs;
      for (const Tensor& t : sample.inputs) {
        ctx.input_sizes.push_back(t.sizes());
        ctx.input_dtypes.push_back(t.dtype());
        ctx.needs_input_grad.push_back(is_floating_point(t.dtype()));
      }
      if (op.gradient_uses_inputs) ctx.inputs = sample.inputs;
      else ctx.inputs.resize(sample.inputs.size());
      if (op.gradient_uses_outputs) ctx.outputs = outputs;
      else ctx.outputs.resize(outputs.size());
      for (int k = 0; k < op.differentiable_outputs; ++k)
        ctx.grad_outputs.push_back(uniform(outputs[k].sizes(), gen, -1, 1, DType::F64));
      const TensorList analytic = op.gradient(ctx);
      REQUIRE(analytic.size() == sample.inputs.size());

      // L(inputs) = sum_k <run(inputs)[k], grad_outputs[k]>
      auto loss = [&](const TensorList& inputs) {
        const TensorList out = op.run(inputs, sample.attrs);
        double value = 0;
        for (int k = 0; k < op.differentiable_outputs; ++k) {
          const auto y = out[k].to_vector<double>();
          const auto g = ctx.grad_outputs[k].to_vector<double>();
          for (size_t j = 0; j < y.size(); ++j) value += y[j] * g[j];
        }
        return value;
      };
      const std::vector<int>& skip = op.nondifferentiable_inputs;
      for (size_t i = 0; i < sample.inputs.size(); ++i) {
        if (!is_floating_point(sample.inputs[i].dtype()) || std::count(skip.begin(), skip.end(), int(i))) continue;
        INFO("input " << i);
        REQUIRE(analytic[i].defined());
        REQUIRE(analytic[i].sizes() == sample.inputs[i].sizes());
        const std::vector<double> grad = analytic[i].to_vector<double>();
        TensorList perturbed = sample.inputs;
        perturbed[i] = sample.inputs[i].clone();
        double* x = perturbed[i].data<double>();
        std::vector<double> numeric(grad.size());
        const double eps = 1e-6;
        for (size_t j = 0; j < grad.size(); ++j) {
          const double saved = x[j];
          x[j] = saved + eps;
          const double plus = loss(perturbed);
          x[j] = saved - eps;
          const double minus = loss(perturbed);
          x[j] = saved;
          numeric[j] = (plus - minus) / (2 * eps);
        }
        CHECK(fathom::testing::mismatch(grad, numeric, 1e-6, 1e-5) == "");
      }
    }
  }
}

TEST_CASE("every registry op has a CUDA kernel (checked against its CPU twin by the cuda tests)", "[kernels]") {
  for (const OpInfo& op : op_registry()) {
    INFO(op.name);
    CHECK(op.has_cuda);
  }
}

TEST_CASE("op costs: matmuls count M·N·K MACs after the transposes, elementwise ops one flop an element", "[kernels]") {
  const OpInfo& matmul = find_op("matmul");
  const TensorList in = {Tensor::zeros({2, 4, 3}), Tensor::zeros({5, 4})};  // [2, 3, 4] x [4, 5] after transposes
  const Attributes transposed{{"transpose_a", true}, {"transpose_b", true}};
  const OpCost cost = matmul.cost(in, matmul.run(in, transposed), transposed);
  CHECK(cost.macs == 2 * 3 * 5 * 4);
  CHECK(cost.flops == 2 * cost.macs);
  const OpInfo& add = find_op("add");
  const TensorList operands = {Tensor::zeros({3, 1}), Tensor::zeros({4})};  // broadcast to [3, 4]
  CHECK(add.cost(operands, add.run(operands, {}), {}).flops == 12);
  const OpInfo& attention = find_op("causal_attention");
  const TensorList qkv = {Tensor::zeros({2, 3, 8, 4}), Tensor::zeros({2, 3, 8, 4}), Tensor::zeros({2, 3, 8, 4})};
  const OpCost a = attention.cost(qkv, attention.run(qkv, {}), {});
  CHECK(a.macs == 2 * (2 * 3 * 8) * 8 * 4);            // q kᵀ and p v, whole
  CHECK(a.flops == 2 * a.macs + (2 * 3 * 8) * 8);      // and the softmax
}
