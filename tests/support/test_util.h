#pragma once
// Helpers shared by the test files: elementwise closeness |a - b| <= atol + rtol * |b| and
// exception-message matching.

#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace fathom::testing {

// Empty string when close; otherwise the first offending element, for the failure message.
inline std::string mismatch(const std::vector<double>& actual, const std::vector<double>& expected, double atol,
                            double rtol) {
  if (actual.size() != expected.size())
    return "sizes differ: " + std::to_string(actual.size()) + " vs " + std::to_string(expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], b = expected[i];
    const bool both_nan = std::isnan(a) && std::isnan(b);
    // a == b first: equal infinities differ by NaN.
    if (!both_nan && a != b && !(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      std::ostringstream out;
      out << "element " << i << ": " << a << " vs expected " << b << " (atol " << atol << ", rtol " << rtol << ")";
      return out.str();
    }
  }
  return "";
}

inline std::string mismatch(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  if (actual.sizes() != expected.sizes())
    return "shapes differ: " + shape_str(actual.sizes()) + " vs " + shape_str(expected.sizes());
  return mismatch(actual.to_vector<double>(), expected.to_vector<double>(), atol, rtol);
}

// The message of the fathom::Error that `body` throws, or "(no error)".
template <typename Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.message();
  }
  return "(no error)";
}

}  // namespace fathom::testing

#define FATHOM_REQUIRE_CLOSE(actual, expected, atol, rtol) \
  REQUIRE(::fathom::testing::mismatch((actual), (expected), (atol), (rtol)) == "")
