#include <catch2/catch.hpp>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"

using namespace fathom;
using namespace fathom::autograd;

TEST_CASE("copies of a Variable are the same parameter", "[autograd]") {
  const Variable w(Tensor::ones({3}), /*requires_grad=*/true, "w");
  const Variable alias = w;
  CHECK(alias.same(w));
  alias.set_grad(Tensor::full({3}, 2.0));
  CHECK(w.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
  w.set_data(Tensor::zeros({3}));
  CHECK(alias.data().to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(w.is_leaf());
  CHECK(w.name() == "w");
}

TEST_CASE("detach, requires_grad and grad mode", "[autograd]") {
  const Variable x(Tensor::ones({2}), true);
  const Variable y = x * 2.0;
  CHECK_FALSE(y.is_leaf());
  CHECK(y.requires_grad());
  const Variable d = y.detach();
  CHECK(d.is_leaf());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.data().shares_storage(y.data()));
  {
    NoGradGuard no_grad;
    const Variable z = x * 3.0;
    CHECK_FALSE(z.requires_grad());
    CHECK(z.grad_fn() == nullptr);
  }
  CHECK(is_grad_enabled());
  CHECK_THROWS_WITH(y.set_requires_grad(false), Catch::Contains("only leaf Variables can change it"));
  CHECK_THROWS_WITH(Variable(Tensor::zeros({2}, DType::I64), true, "ids"),
                    Catch::Contains("Variable \"ids\": only floating-point tensors can require gradients, got i64"));
  CHECK_THROWS_WITH(Variable().data(), Catch::Contains("use of an undefined Variable"));
  CHECK_THROWS_WITH(x.set_grad(Tensor::zeros({3})), Catch::Contains("gradient shape [3] does not match the data's [2]"));
}
