// gradcheck through autograd for every differentiable op in the registry, on its f64 samples
// (broadcasting and non-contiguous inputs included), plus a custom function.
#include <catch2/catch.hpp>

#include "autograd/custom_function.h"
#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "autograd/nn_functions.h"
#include "autograd/op_node.h"
#include "core/generator.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::autograd;

TEST_CASE("every differentiable registry op passes gradcheck through autograd", "[autograd]") {
  int checked = 0;
  for (const OpInfo& op : op_registry()) {
    if (!op.gradient) continue;
    Generator gen(3);
    for (const OpSample& sample : op.samples(DType::F64, gen)) {
      int64_t total = 0;
      for (const Tensor& t : sample.inputs) total += t.numel();
      if (total == 0 || total > 300) continue;
      INFO(op.name << ": " << sample.description);
      VariableList inputs;
      for (size_t i = 0; i < sample.inputs.size(); ++i) {
        const bool skip = std::count(op.nondifferentiable_inputs.begin(), op.nondifferentiable_inputs.end(), int(i));
        inputs.push_back(Variable(sample.inputs[i], is_floating_point(sample.inputs[i].dtype()) && !skip));
      }
      const std::string result =
          gradcheck([&](const VariableList& in) { return apply_op(op, in, sample.attrs)[0]; }, inputs);
      CHECK(result == "");
      ++checked;
    }
  }
  CHECK(checked > 50);
}

namespace {
// y = x³ with a hand-written backward: the custom-node API.
struct Cube final : Function {
  std::string name() const override { return "cube"; }
  TensorList forward(const TensorList& in) override {
    save_for_backward({in[0]});
    return {mul(mul(in[0], in[0]), in[0])};
  }
  TensorList backward(const TensorList& grads) override {
    const Tensor x = saved_tensors()[0];
    return {mul(grads[0], mul(mul(x, x), 3.0))};
  }
};
}  // namespace

TEST_CASE("custom functions take part in autograd and gradcheck", "[autograd]") {
  Generator gen(9);
  const Variable x(uniform({5, 3}, gen, -1, 1, DType::F64), true, "x");
  CHECK(gradcheck([](const VariableList& in) { return apply_function(std::make_shared<Cube>(), in)[0] * 2.0; }, {x}) == "");
  CHECK(gradcheck([](const VariableList& in) { return reshape(transpose(in[0], 0, 1), {15}); }, {x}) == "");
  // A leaf saved by a custom function is read at backward time, so in-place changes are caught.
  const Variable y = apply_function(std::make_shared<Cube>(), {x})[0];
  x.data().fill_(0.5);
  CHECK_THROWS_WITH(sum(y).backward(), Catch::Contains("backward of cube: saved tensor 0 was modified by an in-place"));
}

TEST_CASE("swiglu is silu(gate) * up in one op, with the composition's gradients", "[autograd]") {
  Generator gen(5);
  Tensor gate_data = Tensor::zeros({3, 8}), up_data = Tensor::zeros({3, 8});
  fill_uniform(gate_data, gen, -4.0, 4.0);
  fill_uniform(up_data, gen, -2.0, 2.0);
  const auto grads = [&](bool fused) {
    Variable gate(gate_data.clone(), true), up(up_data.clone(), true);
    const Variable y = fused ? swiglu(gate, up) : mul(silu(gate), up);
    sum(mul(y, y)).backward();
    return std::vector<Tensor>{y.data(), gate.grad(), up.grad()};
  };
  const std::vector<Tensor> fused = grads(true), composed = grads(false);
  for (size_t i = 0; i < fused.size(); ++i) FATHOM_REQUIRE_CLOSE(fused[i], composed[i], 1e-6, 1e-5);
  // The fused op is one node: it saves gate and up, not silu(gate).
  Variable gate(gate_data, true), up(up_data, true);
  CHECK(swiglu(gate, up).grad_fn()->name() == std::string("swiglu_backward"));
  CHECK(gradcheck([](const VariableList& in) { return swiglu(in[0], in[1]); },
                  {Variable(gate_data.to(DType::F64), true), Variable(up_data.to(DType::F64), true)}) == "");
}

TEST_CASE("a Llama-style attention block through autograd: fused qkv narrowed, RoPE, grouped-query heads, a "
          "cache concatenated, padding masked", "[autograd]") {
  Generator gen(9);
  const int64_t B = 2, T = 3, NH = 4, NKV = 2, HS = 4, cached = 2;
  const Tensor qkv_data = uniform({B, T, (NH + 2 * NKV) * HS}, gen, -1, 1, DType::F64);
  const Tensor cache_data = uniform({B, NKV, cached, HS}, gen, -1, 1, DType::F64);
  const Tensor positions = Tensor::from_vector(std::vector<int64_t>{2, 3, 4}, {T});  // after the cache
  std::vector<float> freq{1.0f, 0.1f};
  const Tensor inv_freq = Tensor::from_vector(freq, {2});
  // Row 1's first cached key is padding.
  const Tensor keep = Tensor::from_vector(std::vector<int64_t>{1, 1, 1, 1, 1, 0, 1, 1, 1, 1}, {B * (cached + T)})
                          .reshape({B, cached + T});
  const auto heads = [&](const Variable& x, int64_t n) { return transpose(reshape(x, {B, T, n, HS}), 1, 2); };
  // q, and k and v after the cache, for kv heads repeated `repeat` times (1: grouped, in place).
  const auto attend = [&](const VariableList& in, int64_t repeat) {
    const Variable q = rotary_embedding(heads(narrow(in[0], 2, 0, NH * HS), NH), positions, inv_freq);
    const Variable k = rotary_embedding(heads(narrow(in[0], 2, NH * HS, NKV * HS), NKV), positions, inv_freq);
    const Variable v = heads(narrow(in[0], 2, (NH + NKV) * HS, NKV * HS), NKV);
    AttentionOptions options;
    options.key_padding_mask = keep;
    return causal_attention(q, repeat_interleave(concatenate({in[1], k}, 2), repeat, 1),
                            repeat_interleave(concatenate({in[1], v}, 2), repeat, 1), options);
  };
  const VariableList inputs{Variable(qkv_data, true), Variable(cache_data, true)};
  CHECK(gradcheck([&](const VariableList& in) { return attend(in, 1); }, inputs) == "");
  CHECK(gradcheck([&](const VariableList& in) { return attend(in, NH / NKV); }, inputs) == "");
  // Grouped heads read in place compute what transformers' repeat_kv copies compute.
  FATHOM_REQUIRE_CLOSE(attend(inputs, 1).data(), attend(inputs, NH / NKV).data(), 1e-14, 0.0);
  // index_select picks heads: kv head 1 repeated is query heads 2 and 3's.
  const Tensor pick = Tensor::from_vector(std::vector<int64_t>{1}, {1});
  const Variable kv1 = index_select(Variable(cache_data), 1, pick);
  FATHOM_REQUIRE_CLOSE(kv1.data(), cache_data.narrow(1, 1, 1), 0.0, 0.0);
}
