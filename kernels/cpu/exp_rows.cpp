// The exponential passes of softmax and cross-entropy, over f32 rows. They live in their own
// file, in loops of this plain shape, because that is what the compiler vectorises: inlined
// into the kernels' row lambdas, the same math::exp stayed scalar (a branch per element where
// if-conversion gave up), and softmax ran at 1.4 GB/s.
//
// Like the elementwise kernels, each loop is cloned for AVX-512 (x86-64-v4), AVX2 and the
// baseline, the CPU picking one at load time: exp is compute-bound here (about 35 instructions
// per 8 lanes), and AVX-512 halves that. Every element goes through the same IEEE operations
// in any clone, in the vector body or the scalar tail, and the sum keeps lane_sum's fixed
// lanes, so the results are the same bits on every ISA and thread count.
#include <cstdint>

#include "kernels/cpu/nn_cpu_common.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FATHOM_EXP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FATHOM_EXP_CLONES
#endif

namespace fathom::kernels::nn_cpu {

FATHOM_EXP_CLONES void exp_affine(float* y, const float* x, int64_t n, float scale, float shift, float factor) {
  for (int64_t i = 0; i < n; ++i) y[i] = math::exp(scale * x[i] - shift) * factor;
}

FATHOM_EXP_CLONES float exp_affine_sum(const float* __restrict x, int64_t n, float scale, float shift) {
  return lane_sum<float>(n, [&](int64_t i) { return math::exp(scale * x[i] - shift); });
}

}  // namespace fathom::kernels::nn_cpu
