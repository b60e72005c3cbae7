#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

int64_t shape_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Strides contiguous_strides(const Shape& sizes) {
  Strides strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

std::string shape_str(const Shape& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t range = std::max<int64_t>(ndim, 1);
  FATHOM_CHECK(dim >= -range && dim < range, op, ": dim ", dim, " out of range for a tensor with ", ndim,
               " dims (expected ", -range, " to ", range - 1, ")");
  return dim < 0 ? dim + range : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    const int64_t sa = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    const int64_t sb = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    FATHOM_CHECK(sa == sb || sa == 1 || sb == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                 " cannot be broadcast (dim ", i, ": ", sa, " vs ", sb, ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Strides broadcast_strides(const Shape& sizes, const Strides& strides, const Shape& target) {
  FATHOM_CHECK(sizes.size() <= target.size(), "cannot broadcast shape ", shape_str(sizes), " to ",
               shape_str(target));
  const size_t lead = target.size() - sizes.size();
  Strides out(target.size(), 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t size = sizes[i];
    FATHOM_CHECK(size == target[lead + i] || size == 1, "cannot broadcast shape ", shape_str(sizes), " to ",
                 shape_str(target));
    out[lead + i] = size == 1 ? 0 : strides[i];
  }
  return out;
}

}  // namespace fathom
