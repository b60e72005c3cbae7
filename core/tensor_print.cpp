// Printing: nested brackets like numpy, eliding the middle of long dimensions.
#include <cmath>
#include <cstdio>
#include <ostream>

#include "core/tensor.h"

namespace fathom {
namespace {

constexpr int64_t kEdgeItems = 3;      // kept at each end of a long dimension
constexpr int64_t kSummariseAbove = 1000;

std::string format_value(double v, DType dtype) {
  char buffer[32];
  if (dtype == DType::Bool) return v != 0 ? "true" : "false";
  if (!is_floating_point(dtype)) std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(v));
  else std::snprintf(buffer, sizeof buffer, "%.4g", v);
  return buffer;
}

void print_dim(std::ostream& out, const Tensor& t, const std::vector<double>& values, int64_t dim, int64_t base,
               bool summarise, int indent) {
  const int64_t size = t.size(dim);
  const int64_t stride = shape_numel(Shape(t.sizes().begin() + dim + 1, t.sizes().end()));
  out << '[';
  const std::string separator = dim + 1 == t.dim() ? ", " : ",\n" + std::string(indent + 1, ' ');
  for (int64_t i = 0; i < size; ++i) {
    if (i > 0) out << separator;
    if (summarise && size > 2 * kEdgeItems && i == kEdgeItems) {
      out << "...";
      i = size - kEdgeItems - 1;  // the loop's ++i lands on the first trailing item
      continue;
    }
    if (dim + 1 == t.dim()) out << format_value(values[base + i], t.dtype());
    else print_dim(out, t, values, dim + 1, base + i * stride, summarise, indent + 1);
  }
  out << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) {
  out << tensor.str();
  if (!tensor.defined()) return out;
  if (tensor.storage()->is_released()) return out << " (released)";
  const std::vector<double> values = tensor.to_vector<double>();
  out << '\n';
  if (tensor.dim() == 0) return out << format_value(values[0], tensor.dtype());
  if (tensor.numel() == 0) return out << "[]";
  print_dim(out, tensor, values, 0, 0, tensor.numel() > kSummariseAbove, 0);
  return out;
}

}  // namespace fathom
