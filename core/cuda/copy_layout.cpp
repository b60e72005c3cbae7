#include "core/cuda/copy_layout.h"

#include "core/error.h"

namespace fathom::cuda {

CopyLayout make_copy_layout(const Shape& sizes, const Strides& dst_strides, const Strides& src_strides) {
  FATHOM_CHECK(dst_strides.size() == sizes.size() && src_strides.size() == sizes.size(), "copy: shape ",
               shape_str(sizes), " with ", dst_strides.size(), " and ", src_strides.size(), " strides");
  CopyLayout layout;
  layout.numel = shape_numel(sizes);
  // Merged dims, innermost first.
  int64_t merged_sizes[kMaxCopyDims + 1];
  int64_t merged_dst[kMaxCopyDims + 1];
  int64_t merged_src[kMaxCopyDims + 1];
  int n = 0;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (n > 0 && dst_strides[d] == merged_dst[n - 1] * merged_sizes[n - 1] &&
        src_strides[d] == merged_src[n - 1] * merged_sizes[n - 1]) {
      merged_sizes[n - 1] *= sizes[d];
      continue;
    }
    FATHOM_CHECK(n < kMaxCopyDims, "copy: the layout of shape ", shape_str(sizes), " has more than ",
                 kMaxCopyDims, " dims that cannot be merged; make a tensor contiguous() first");
    merged_sizes[n] = sizes[d];
    merged_dst[n] = dst_strides[d];
    merged_src[n] = src_strides[d];
    ++n;
  }
  layout.ndim = n;
  for (int k = 0; k < n; ++k) {  // back to outermost first
    layout.sizes[k] = merged_sizes[n - 1 - k];
    layout.dst_strides[k] = merged_dst[n - 1 - k];
    layout.src_strides[k] = merged_src[n - 1 - k];
  }
  return layout;
}

}  // namespace fathom::cuda
