#include <catch2/catch.hpp>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/nn_functions.h"

using namespace fathom;
using namespace fathom::autograd;

TEST_CASE("an in-place change to a saved tensor is an error naming the op", "[autograd]") {
  const Variable x(Tensor::full({3}, 2.0, DType::F64), true, "x");
  const Variable h = x * 3.0;   // non-leaf
  const Variable y = exp(h);    // exp saves its output y
  Tensor y_data = y.data();
  y_data.fill_(0.0);            // modifies what exp_backward needs
  CHECK_THROWS_WITH(sum(y).backward(),
                    Catch::Contains("backward of exp_backward: output 0 was modified by an in-place operation"));
}

TEST_CASE("backward sees the parameter's current data after set_data", "[autograd]") {
  const Variable w(Tensor::full({2}, 1.0, DType::F64), true, "w");
  const Variable x(Tensor::full({2}, 5.0, DType::F64), true, "x");
  const Variable y = x * w;
  w.set_data(Tensor::full({2}, 7.0, DType::F64));  // e.g. gathered again before backward
  sum(y).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{7, 7});
}

TEST_CASE("a gradient for a parameter whose data was released names the cause", "[autograd]") {
  const Variable w(Tensor::full({2, 2}, 1.0, DType::F64), true, "weight");
  const Variable x(Tensor::full({3, 2}, 5.0, DType::F64), false, "x");
  const Variable y = matmul(x, w);
  // The gradient needs only x; the parameter's data is released before it arrives (ZeRO-3's
  // gatherer once did this when activation checkpointing recomputed a block).
  w.set_data(Tensor::empty({0}, DType::F64));
  CHECK_THROWS_WITH(sum(y).backward(), Catch::Contains("gradient of \"weight\" has shape [2, 2] but the parameter "
                                                       "has shape [0]: its data was released"));
}

TEST_CASE("release and refill keep the version, so a refilled saved parameter passes", "[autograd]") {
  const Variable w(Tensor::full({4}, 2.0, DType::F64), true, "w");
  const Variable x(Tensor::full({4}, 1.5, DType::F64), true, "x");
  const Variable y = x * w;
  const uint64_t version = w.data().version();
  w.data().storage()->release();
  w.data().storage()->refill();
  CHECK(w.data().version() == version);
  // Refill leaves the contents undefined; the gatherer writes them without bumping the version
  // (raw copy into the storage), as ZeRO-3's all-gather does.
  double* values = w.data().data<double>();
  for (int i = 0; i < 4; ++i) values[i] = 2.0;
  sum(y).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 2, 2, 2});
}
