#pragma once
// The layout handed to elementwise kernels: one broadcast shape and each operand's strides
// in elements (0 on broadcast dims). A plain struct of arrays, so it is passed by value to
// CUDA kernels and .cu files need no heavy header to use it.

#include <cstdint>

namespace fathom {

inline constexpr int kMaxElementwiseDims = 8;

struct BinaryLayout {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxElementwiseDims] = {};
  int64_t out_strides[kMaxElementwiseDims] = {};
  int64_t a_strides[kMaxElementwiseDims] = {};
  int64_t b_strides[kMaxElementwiseDims] = {};
};

}  // namespace fathom
