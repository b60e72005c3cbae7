// CPU twin of the binary elementwise kernels: strided loops over the broadcast shape, split
// across threads by element ranges (each output element written once; no reductions).
#include <type_traits>

#include "core/error.h"
#include "core/strided_loop.h"
#include "kernels/binary_kernels.h"

namespace fathom::kernels {
namespace {
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
}

void add_forward_cpu(DType dtype, void* out, const void* a, const void* b, const BinaryLayout& layout, bool accumulate) {
  const Shape sizes(layout.sizes, layout.sizes + layout.ndim);
  const Strides out_strides(layout.out_strides, layout.out_strides + layout.ndim);
  const Strides a_strides(layout.a_strides, layout.a_strides + layout.ndim);
  const Strides b_strides(layout.b_strides, layout.b_strides + layout.ndim);
  FATHOM_DISPATCH_DTYPE(dtype, "add", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      FATHOM_FAIL("add: bool tensors are not supported (convert to an integer or float dtype)");
    } else {
      T* o = static_cast<T*>(out);
      const T* x = static_cast<const T*>(a);
      const T* y = static_cast<const T*>(b);
      using C = Compute<T>;
      for_each_strided<3>(sizes, {&out_strides, &a_strides, &b_strides},
                          [&](const std::array<int64_t, 3>& at, int64_t n, const std::array<int64_t, 3>& step) {
                            for (int64_t j = 0; j < n; ++j) {
                              T& dst = o[at[0] + j * step[0]];
                              C value = C(x[at[1] + j * step[1]]) + C(y[at[2] + j * step[2]]);
                              if (accumulate) value += C(dst);
                              dst = T(value);
                            }
                          });
    }
  });
}

}  // namespace fathom::kernels
