#include <catch2/catch.hpp>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::autograd;

namespace {
Variable leaf(std::vector<double> values, const std::string& name = "") {
  return Variable(Tensor::from_vector(values), true, name);
}
}  // namespace

TEST_CASE("backward through a small graph gives the hand-computed gradients", "[autograd]") {
  const Variable x = leaf({1.0, 2.0, 3.0}, "x");
  const Variable w = leaf({0.5, -1.0, 2.0}, "w");
  // L = sum(tanh(x * w) + x)   dL/dx = w (1 - tanh²(xw)) + 1   dL/dw = x (1 - tanh²(xw))
  const Variable loss = sum(tanh(x * w) + x);
  loss.backward();
  const auto xv = x.data().to_vector<double>(), wv = w.data().to_vector<double>();
  std::vector<double> dx(3), dw(3);
  for (int i = 0; i < 3; ++i) {
    const double t = std::tanh(xv[i] * wv[i]);
    dx[i] = wv[i] * (1 - t * t) + 1;
    dw[i] = xv[i] * (1 - t * t);
  }
  CHECK(fathom::testing::mismatch(x.grad().to_vector<double>(), dx, 1e-14, 1e-12) == "");
  CHECK(fathom::testing::mismatch(w.grad().to_vector<double>(), dw, 1e-14, 1e-12) == "");
  CHECK(x.grad().storage()->tag() == MemoryTag::Gradients);
}

TEST_CASE("a leaf used twice gets the sum of both paths", "[autograd]") {
  const Variable x = leaf({3.0}, "x");
  const Variable y = x * x + x * 2.0;  // dy/dx = 2x + 2 = 8
  y.backward();
  CHECK(x.grad().item() == 8.0);
}

TEST_CASE("several outputs with given gradients, several graphs alive at once", "[autograd]") {
  const Variable x = leaf({1.0, 2.0}, "x");
  const Variable a = x * 3.0;
  const Variable b = exp(x);
  backward({a, b}, {Tensor::from_vector<double>({1, 1}), Tensor::from_vector<double>({2, 0})});
  const auto g = x.grad().to_vector<double>();
  CHECK(g[0] == Approx(3 + 2 * std::exp(1.0)));
  CHECK(g[1] == Approx(3.0));

  // Two micro-batches' graphs, built first, run backward in reverse order (as 1F1B may).
  x.zero_grad();
  const Variable loss1 = sum(x * 2.0);
  const Variable loss2 = sum(x * x);
  loss2.backward();
  loss1.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2 + 2 * 1.0, 2 + 2 * 2.0});
}

TEST_CASE("retain_graph allows a second backward; without it the error says so", "[autograd]") {
  const Variable x = leaf({2.0}, "x");
  const Variable y = exp(x);  // saves its output
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  CHECK(x.grad().item() == Approx(2 * std::exp(2.0)));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("was already freed; call backward(..., retain_graph=true)"));
}

TEST_CASE("gradients accumulate into a view of a flat buffer owned elsewhere", "[autograd]") {
  const Variable a = leaf({1.0, 2.0}, "a");
  const Variable b = leaf({3.0, 4.0, 5.0}, "b");
  Tensor flat = Tensor::zeros({5}, DType::F64);  // e.g. a ZeRO/DDP gradient bucket
  a.set_grad(flat.narrow(0, 0, 2));
  b.set_grad(flat.narrow(0, 2, 3));
  for (int micro = 0; micro < 2; ++micro) (sum(a * 2.0) + sum(b * b)).backward();
  CHECK(flat.to_vector<double>() == std::vector<double>{4, 4, 12, 16, 20});
  CHECK(a.grad().shares_storage(flat));
}

TEST_CASE("backward rejects bad requests", "[autograd]") {
  const Variable x = leaf({1.0, 2.0}, "x");
  const Variable y = x * 2.0;
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("a gradient is implicit only for one-element outputs"));
  CHECK_THROWS_WITH(y.backward(Tensor::ones({3}, DType::F64)),
                    Catch::Contains("gradient 0 has shape [3] but the output has shape [2]"));
  CHECK_THROWS_WITH(Variable(Tensor::ones({1})).backward(), Catch::Contains("does not require grad"));
  CHECK_THROWS_WITH(backward({y}, {Tensor(), Tensor()}), Catch::Contains("1 outputs but 2 gradients"));
}

TEST_CASE("zero bubble's split backward: the input gradient now, the weights' held until run()", "[autograd]") {
  const Variable x = leaf({1.0, 2.0, 3.0}, "x");  // a received activation
  const Variable w = leaf({0.5, -1.0, 2.0}, "w");  // a parameter, used twice
  const Variable b = leaf({0.25}, "b");
  const auto loss_of = [&] { return sum(tanh(x * w) * w + b); };
  loss_of().backward();
  const std::vector<double> dx = x.grad().to_vector<double>(), dw = w.grad().to_vector<double>();
  x.zero_grad(), w.zero_grad(), b.zero_grad();

  int hooks = 0;
  HookHandle hook = w.add_grad_ready_hook([&](const Variable&) { ++hooks; });
  DeferredAccumulation weights;
  backward_deferring({loss_of()}, {}, {x}, weights);
  CHECK(x.grad().to_vector<double>() == dx);  // B: the input's gradient, at once
  CHECK(!w.grad().defined());
  CHECK(!b.grad().defined());
  CHECK(hooks == 0);
  CHECK(!weights.empty());
  weights.run();  // W
  CHECK(w.grad().to_vector<double>() == dw);
  CHECK(b.grad().item() == 3.0);  // broadcast over three elements
  CHECK(hooks == 1);
  CHECK(weights.empty());
}
