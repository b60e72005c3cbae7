// The exponential passes of softmax and cross-entropy, over f32 rows. They live in their own
// file, in loops of this plain shape, because that is what the compiler vectorises: inlined
// into the kernels' row lambdas, the same math::exp stayed scalar (a branch per element where
// if-conversion gave up), and softmax ran at 1.4 GB/s.
//
// The loops are compiled twice, for the library's baseline (AVX2) and for AVX-512, and the
// CPU picks one at start-up: exp is compute-bound here (about 35 instructions per 8 lanes),
// and AVX-512's mask registers replace its blends. Every element goes through the same IEEE
// operations in either build, in the vector body or the scalar tail, and the sums keep
// lane_sum's fixed lanes, so the results are the same bits on every ISA and thread count.
#include <cstdint>

#include "kernels/cpu/nn_cpu_common.h"

// The sum is lane_sum's order written out: templates defined outside a target region keep the
// baseline target, and the AVX-512 lambda would not be inlined into them.
#define FATHOM_EXP_ROWS_LOOPS                                                            \
  void exp_affine(float* y, const float* x, int64_t n, float scale, float shift) {      \
    for (int64_t i = 0; i < n; ++i) y[i] = math::exp(scale * x[i] - shift);             \
  }                                                                                      \
  float exp_affine_sum(const float* __restrict x, int64_t n, float scale, float shift) { \
    constexpr int L = kLanes<float>;                                                     \
    float lanes[L] = {};                                                                 \
    int64_t i = 0;                                                                       \
    for (; i + L <= n; i += L)                                                           \
      for (int k = 0; k < L; ++k) lanes[k] += math::exp(scale * x[i + k] - shift);      \
    float tail = 0;                                                                      \
    for (; i < n; ++i) tail += math::exp(scale * x[i] - shift);                          \
    for (int width = L / 2; width > 0; width /= 2)                                       \
      for (int k = 0; k < width; ++k) lanes[k] += lanes[k + width];                      \
    return lanes[0] + tail;                                                              \
  }

namespace fathom::kernels::nn_cpu {
namespace baseline {
FATHOM_EXP_ROWS_LOOPS
}  // namespace baseline

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,fma,prefer-vector-width=512")
namespace avx512 {
FATHOM_EXP_ROWS_LOOPS
}  // namespace avx512
#pragma GCC pop_options
#define FATHOM_EXP_ROWS_AVX512 1
#endif

namespace {
bool use_avx512() {
#if FATHOM_EXP_ROWS_AVX512
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  }();
  return has;
#else
  return false;
#endif
}
}  // namespace

void exp_affine(float* y, const float* x, int64_t n, float scale, float shift) {
#if FATHOM_EXP_ROWS_AVX512
  if (use_avx512()) return avx512::exp_affine(y, x, n, scale, shift);
#endif
  baseline::exp_affine(y, x, n, scale, shift);
}

float exp_affine_sum(const float* x, int64_t n, float scale, float shift) {
#if FATHOM_EXP_ROWS_AVX512
  if (use_avx512()) return avx512::exp_affine_sum(x, n, scale, shift);
#endif
  return baseline::exp_affine_sum(x, n, scale, shift);
}

}  // namespace fathom::kernels::nn_cpu
