#include <catch2/catch.hpp>

#include <ranges>

#include "autograd/checkpoint.h"
#include "autograd/functions.h"
#include "core/cuda/cuda_runtime.h"
#include "core/generator.h"
#include "nn/containers.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/normalization.h"

using namespace fathom;
using namespace fathom::nn;

namespace {
struct Net : Module {
  std::shared_ptr<Linear> first, second;
  std::shared_ptr<LayerNorm> norm;
  Net() {
    first = register_module("first", std::make_shared<Linear>(4, 3));
    norm = register_module("norm", std::make_shared<LayerNorm>(3));
    second = register_module("second", std::make_shared<Linear>(3, 2, /*bias=*/false));
    register_buffer("steps", Tensor::zeros({1}, DType::I64));
  }
  Variable forward(const Variable& x) override { return (*second)((*norm)((*first)(x))); }
  std::string type_name() const override { return "Net"; }
};

std::vector<std::string> names(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
  return out;
}
}  // namespace

TEST_CASE("parameters are named by dotted paths in registration order", "[nn]") {
  Net net;
  CHECK(names(net) == std::vector<std::string>{"first.weight", "first.bias", "norm.weight", "norm.bias", "second.weight"});
  CHECK(net.parameter_count() == 4 * 3 + 3 + 3 + 3 + 3 * 2);
  CHECK(net.named_buffers()[0].first == "steps");
  std::vector<std::string> modules;
  for (const auto& [name, m] : net.named_modules()) modules.push_back(name);
  CHECK(modules == std::vector<std::string>{"", "first", "norm", "second"});
  CHECK(net.parameter("norm.bias").same(net.norm->bias));
  CHECK_THROWS_WITH(net.parameter("norm.gain"), Catch::Contains("no parameter named \"norm.gain\""));
  CHECK(net.parameters()[0].data().storage()->tag() == MemoryTag::Parameters);
}

TEST_CASE("a tied parameter is listed once", "[nn]") {
  struct Tied : Module {
    std::shared_ptr<Linear> a, b;
    Tied() {
      a = register_module("a", std::make_shared<Linear>(3, 3, false));
      b = register_module("b", std::make_shared<Linear>(3, 3, false));
      b->tie_weight(a->weight);
    }
  } tied;
  CHECK(names(tied) == std::vector<std::string>{"a.weight"});
  CHECK(tied.b->weight.same(tied.a->weight));
  CHECK(tied.parameter_count() == 9);
}

TEST_CASE("state_dict round trip and its errors", "[nn]") {
  Net source, target;
  Generator gen(1);
  for (const Variable& p : source.parameters()) p.data().copy_(uniform(p.sizes(), gen));
  target.load_state_dict(source.state_dict());
  const auto a = source.state_dict(), b = target.state_dict();
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].second.to_vector<double>() == b[i].second.to_vector<double>());

  NamedTensors missing = source.state_dict();
  missing.erase(missing.begin() + 1);
  CHECK_THROWS_WITH(target.load_state_dict(missing), Catch::Contains("load_state_dict: missing 1 entry: first.bias"));
  target.load_state_dict(missing, /*strict=*/false);

  NamedTensors extra = source.state_dict();
  extra.emplace_back("head.weight", Tensor::zeros({2}));
  CHECK_THROWS_WITH(target.load_state_dict(extra), Catch::Contains("unexpected 1 entry: head.weight"));

  NamedTensors wrong = source.state_dict();
  wrong[0].second = Tensor::zeros({4, 3});
  const auto before = target.state_dict()[1].second.to_vector<double>();
  CHECK_THROWS_WITH(target.load_state_dict(wrong),
                    Catch::Contains("\"first.weight\" has shape [4, 3] in the state dict but [3, 4] in the model"));
  CHECK(target.state_dict()[1].second.to_vector<double>() == before);  // nothing was written
}

TEST_CASE("train/eval, zero_grad, apply, to(dtype) and forward hooks", "[nn]") {
  Net net;
  net.eval();
  CHECK_FALSE(net.first->is_training());
  net.train();
  CHECK(net.norm->is_training());
  int visited = 0;
  net.apply([&](Module&) { ++visited; });
  CHECK(visited == 4);

  const Variable x(Tensor::ones({5, 4}));
  autograd::sum(net(x)).backward();
  CHECK(net.first->weight.grad().defined());
  net.zero_grad();
  CHECK_FALSE(net.first->weight.grad().defined());

  std::vector<std::string> events;
  autograd::HookHandle pre = net.register_forward_pre_hook([&](Module&, VariableList&) { events.push_back("pre"); });
  autograd::HookHandle post = net.register_forward_hook([&](Module&, const VariableList&, VariableList& out) {
    events.push_back("post " + shape_str(out[0].sizes()));
  });
  net(x);
  CHECK(net.forward_hook_count() == 2);
  pre.reset();
  post.reset();
  CHECK(net.forward_hook_count() == 0);
  net(x);
  CHECK(events == std::vector<std::string>{"pre", "post [5, 2]"});

  const Variable weight = net.first->weight;
  net.to(DType::BF16);
  CHECK(weight.dtype() == DType::BF16);  // the same Variable, converted
  CHECK(net.named_buffers()[0].second.dtype() == DType::I64);
  CHECK_THROWS_WITH(net.to(DType::I32), Catch::Contains("need a floating-point dtype"));
}

TEST_CASE("Linear and LayerNorm compute what they should", "[nn]") {
  Linear linear(3, 2);
  linear.weight.data().copy_(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  linear.bias.data().copy_(Tensor::from_vector<float>({0.5f, -1}));
  const Variable x(Tensor::from_vector<float>({1, 0, -1, 2, 1, 0}, {1, 2, 3}));
  CHECK(linear(x).data().to_vector<float>() == std::vector<float>{-1.5f, -3, 4.5f, 12});
  CHECK(linear(x).sizes() == Shape{1, 2, 2});
  CHECK_THROWS_WITH(linear(Variable(Tensor::ones({2, 4}))), Catch::Contains("does not end in in_features = 3"));
  Sequential seq;
  seq.push_back(std::make_shared<Linear>(3, 3));
  seq.push_back(std::make_shared<LayerNorm>(3));
  const auto y = seq(x).data().to_vector<float>();
  CHECK(std::fabs(y[0] + y[1] + y[2]) < 1e-5);
}

TEST_CASE("a ModuleList is a range of its modules, in order", "[nn]") {
  ModuleList blocks;
  blocks.push_back(std::make_shared<Linear>(3, 4));
  blocks.push_back(std::make_shared<LayerNorm>(4));
  std::vector<std::string> types;
  for (Module& block : blocks) types.push_back(block.type_name());
  CHECK(types == std::vector<std::string>{"Linear", "LayerNorm"});
  static_assert(std::ranges::forward_range<const ModuleList&>);
  const Variable x(Tensor::ones({2, 3}));
  Variable h = x;
  for (auto& block : blocks) h = block(h);
  CHECK(h.sizes() == Shape{2, 4});
}

TEST_CASE("losses", "[nn]") {
  const Variable logits(Tensor::from_vector<double>({1, 2, 3, 1, 1, 1}, {2, 3}), true);
  const Tensor targets = Tensor::from_vector<int64_t>({2, -100});
  const Variable loss = cross_entropy(logits, targets);
  CHECK(loss.item() == Approx(std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3));
  const Variable a(Tensor::from_vector<double>({1, 2}), true), b(Tensor::from_vector<double>({3, 2}));
  CHECK(mse_loss(a, b).item() == 2.0);
  CHECK_THROWS_WITH(mse_loss(a, Variable(Tensor::zeros({3}, DType::F64))), Catch::Contains("shape [2] and target shape [3] differ"));
}

TEST_CASE("dropout masks follow the global sample index, not the batch position", "[nn]") {
  Dropout drop(0.5);
  const Variable x(Tensor::ones({4, 3, 8}));
  set_dropout_context({7, 1, Tensor::from_vector<int64_t>({10, 11, 12, 13})});
  const auto full = drop(x).data();
  // A "rank" holding samples 12 and 13 only reproduces rows 2 and 3 of the full batch.
  set_dropout_context({7, 1, Tensor::from_vector<int64_t>({12, 13})});
  const auto half = drop(Variable(Tensor::ones({2, 3, 8}))).data();
  CHECK(half.to_vector<float>() == full.narrow(0, 2, 2).to_vector<float>());
  drop.eval();
  CHECK(drop(x).data().shares_storage(x.data()));
  CHECK_THROWS_WITH(Dropout(1.0), Catch::Contains("p must be in [0, 1), got 1"));
}

TEST_CASE("a checkpointed dropout recomputes its own micro-batch's mask after another forward", "[nn]") {
  Dropout drop(0.5);
  const auto segment = [&](const autograd::VariableList& in) {
    return autograd::VariableList{autograd::mul(drop(in[0]), in[0])};
  };
  const auto gradient = [&](bool checkpointed) {
    const Variable x(Tensor::arange(16).to(DType::F32).reshape({2, 8}), true);
    set_dropout_context({7, 1, Tensor::from_vector<int64_t>({10, 11})});
    const Variable y = checkpointed ? autograd::checkpoint(segment, {x})[0] : segment({x})[0];
    // A pipeline runs the next micro-batch's forward before this one's backward.
    set_dropout_context({7, 1, Tensor::from_vector<int64_t>({12, 13})});
    (void)drop(Variable(Tensor::ones({2, 8})));
    autograd::sum(y).backward();
    return x.grad().to_vector<float>();
  };
  CHECK(gradient(true) == gradient(false));
}

TEST_CASE("dropout on a sequence shard draws the whole sequence's mask at those positions", "[nn]") {
  const Variable x(Tensor::ones({2, 6, 8}));
  for (const bool with_samples : {true, false}) {
    INFO("sample indices given " << with_samples);
    const Tensor samples = with_samples ? Tensor::from_vector<int64_t>({4, 9}) : Tensor();
    Dropout drop(0.5);
    set_dropout_context({7, 1, samples});
    const Tensor whole = drop(x).data();
    for (const int64_t first : {0, 2, 4}) {  // a rank of 3 holding positions [first, first + 2)
      set_dropout_context({7, 1, samples});
      const Tensor part = drop.forward_sequence_shard(Variable(Tensor::ones({2, 2, 8})), first, 6).data();
      CHECK(part.to_vector<float>() == whole.narrow(1, first, 2).contiguous().to_vector<float>());
    }
  }
  Dropout drop(0.5);
  CHECK_THROWS_WITH(drop.forward_sequence_shard(Variable(Tensor::ones({2, 4, 8})), 4, 6),
                    Catch::Contains("a sequence shard (B, T, C) at positions [4, 8) of 6"));
}

TEST_CASE("to(device) keeps the Variables; device() names a split module", "[nn]") {
  Net net;
  const Variable weight = net.first->weight;
  CHECK(net.device() == kCPU);
  net.to(kCPU);  // already there: nothing moves
  CHECK(net.first->weight.data().raw_data() == weight.data().raw_data());
  if (cuda::device_count() == 0)
    CHECK_THROWS_WITH(net.to(Device::cuda(0)), Catch::Contains("no CUDA device"));
  CHECK(Module().device() == kCPU);  // no parameters
}
