#pragma once
// Entry points of the device copy kernels (core/cuda/copy_cuda.cu) and the layout they take.
// Light header: .cu files include it. core/cuda/copy_layout.h builds the layout from tensors'
// sizes and strides.

#include <cstdint>

#include "core/dtype.h"

namespace fathom::cuda {

// Dims left after merging (make_copy_layout merges every pair of dims that both operands
// traverse as one), so this bounds the non-mergeable dims, not a tensor's rank.
inline constexpr int kMaxCopyDims = 16;

struct CopyLayout {
  int ndim = 0;  // 0: a single element
  int64_t numel = 0;
  int64_t sizes[kMaxCopyDims] = {};
  int64_t dst_strides[kMaxCopyDims] = {};  // in elements
  int64_t src_strides[kMaxCopyDims] = {};  // in elements; 0 on broadcast dims
};

inline constexpr int kCopyThreads = 256;
// Blocks of kCopyThreads for the copy kernels' grid-stride loops over `numel` elements: enough
// to cover them once, at most 65535 * 16 (each thread then loops), at least 1.
constexpr int copy_grid_blocks(int64_t numel) {
  constexpr int64_t kMaxBlocks = int64_t{65535} * 16;
  const int64_t wanted = (numel + kCopyThreads - 1) / kCopyThreads;
  return static_cast<int>(wanted < 1 ? 1 : wanted > kMaxBlocks ? kMaxBlocks : wanted);
}

// dst[i] = convert<dst dtype>(src[i]) over the layout (core/convert.h's rules), on `stream`.
void copy_cuda(DType dst_dtype, void* dst, DType src_dtype, const void* src, const CopyLayout& layout,
               void* stream);
// dst[i] = *value over the layout's dst strides; `value` is one host element of `dtype`.
void fill_cuda(DType dtype, void* dst, const CopyLayout& layout, const void* value, void* stream);

}  // namespace fathom::cuda
