#pragma once
// The online softmax state shared by the softmax and cross-entropy kernels: a running max m and
// the sum s of exp(x - m), folded one value at a time and merged across threads in a fixed
// order. Inf/NaN rows follow the CPU twins: a NaN makes s NaN, -Inf values add nothing.
#include <limits>

#include "kernels/cuda/row_ops.cuh"
#include "kernels/elementwise_math.h"

namespace fathom::kernels::rows {

template <typename A>
__device__ A infinity() {
  return std::numeric_limits<A>::infinity();
}

template <typename A>
struct MaxSum {
  A m, s;
};

template <typename A>
__device__ MaxSum<A> shuffle_down(MaxSum<A> v, int offset) {
  return MaxSum<A>{shuffle_down(v.m, offset), shuffle_down(v.s, offset)};
}
template <typename A>
__device__ MaxSum<A> shuffle_first(MaxSum<A> v) {
  return MaxSum<A>{shuffle_first(v.m), shuffle_first(v.s)};
}

template <typename A>
__device__ void online_add(MaxSum<A>& st, A x) {
  if (x > st.m) {  // false for NaN: m is never NaN
    st.s = st.s * math::exp(st.m - x) + A(1);
    st.m = x;
  } else if (x != -infinity<A>()) {  // -Inf adds exp(-Inf) = 0; skipping it avoids -Inf - -Inf
    st.s += math::exp(x - st.m);      // a NaN x makes s NaN, as on the CPU
  }
}

struct MergeMaxSum {
  template <typename A>
  __device__ MaxSum<A> operator()(MaxSum<A> a, MaxSum<A> b) const {
    const A m = a.m > b.m ? a.m : b.m;
    if (m == -infinity<A>()) return MaxSum<A>{m, a.s + b.s};
    return MaxSum<A>{m, a.s * math::exp(a.m - m) + b.s * math::exp(b.m - m)};
  }
};

}  // namespace fathom::kernels::rows
