// The C++ snippets of README.md, verbatim (docs_check compares them); "docs:skip" lines are the
// scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>
TEST_CASE("README.md: a first tensor op") {  // docs:skip
auto x = fathom::Tensor::arange(6).reshape({2, 3});
auto y = fathom::add(x, fathom::Tensor::from_vector<float>({10, 20, 30}));
  CHECK(y.to_vector<float>() == std::vector<float>{10, 21, 32, 13, 24, 35});  // docs:skip
}  // docs:skip
