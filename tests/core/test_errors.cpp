#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/logging.h"
#include "core/tensor.h"

using namespace fathom;

TEST_CASE("FATHOM_CHECK throws fathom::Error with file:line and message", "[core]") {
  try {
    const int got = 3;
    FATHOM_CHECK(got == 4, "expected 4, got ", got);
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.message() == "expected 4, got 3");
    CHECK(e.location().rfind("tests/core/test_errors.cpp:", 0) == 0);
    CHECK(std::string(e.what()) == e.location() + ": expected 4, got 3");
  }
}

TEST_CASE("shape errors name both shapes", "[core]") {
  const Tensor a = Tensor::zeros({4, 64, 768});
  const Tensor b = Tensor::zeros({512, 10});
  CHECK_THROWS_WITH(broadcast_shapes(a.sizes(), b.sizes(), "add"),
                    Catch::Contains("add: shapes [4, 64, 768] and [512, 10] cannot be broadcast"));
  CHECK_THROWS_WITH(a.view({5, -1}), Catch::Contains("view: shape [5, -1] is invalid for 196608 elements"));
  CHECK_THROWS_WITH(a.select(3, 0), Catch::Contains("select: dim 3 out of range for a tensor with 3 dims"));
  CHECK_THROWS_WITH(a.data<double>(), Catch::Contains("data<f64>() called on a f32 tensor"));
}

TEST_CASE("log levels parse and reject unknown names", "[core]") {
  CHECK(parse_log_level("debug") == LogLevel::Debug);
  CHECK(parse_log_level("off") == LogLevel::Off);
  CHECK_THROWS_WITH(parse_log_level("verbose"), Catch::Contains("unknown log level \"verbose\"; use one of debug"));
  const LogLevel before = log_level();
  set_log_level(LogLevel::Error);
  CHECK(log_level() == LogLevel::Error);
  set_log_level(before);
}
