// CPU rotary position embedding (kernels/rotary.h) on contiguous (B, H, T, D) rows.
// The cos/sin of each (position row, frequency) are computed once into a table (T or B x T rows
// of R/2 pairs) and shared by the H heads; then every head row is an independent elementwise
// pass, split over threads by rows, so results do not depend on the thread count.
#include <cmath>

#include "kernels/cpu/nn_cpu_common.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {
using namespace nn_cpu;

template <typename T>
void rotary(T* out, const T* x, const int64_t* positions, const float* inv_freq, const RotaryShape& s) {
  using A = Acc<T>;
  const int64_t half = s.R / 2, position_rows = (s.positions_batched ? s.B : 1) * s.T;
  // The angle is the f32 product whatever T is (transformers computes it in f32 under any dtype).
  std::vector<A> cos_table(position_rows * half), sin_table(position_rows * half);
  parallel_rows(position_rows, half * 8, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const A angle = static_cast<A>(static_cast<float>(positions[p]) * inv_freq[i]);
        cos_table[p * half + i] = std::cos(angle);
        sin_table[p * half + i] = s.inverse ? -std::sin(angle) : std::sin(angle);
      }
  });
  const int64_t rows = s.B * s.H * s.T;
  parallel_rows(rows, s.D * 3, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t t = r % s.T, b = r / (s.H * s.T);
      const int64_t p = s.positions_batched ? b * s.T + t : t;
      const A* c = cos_table.data() + p * half;
      const A* sn = sin_table.data() + p * half;
      const T* xr = x + r * s.D;
      T* o = out + r * s.D;
      for (int64_t i = 0; i < half; ++i) {
        const A x1 = static_cast<A>(xr[i]), x2 = static_cast<A>(xr[i + half]);
        o[i] = static_cast<T>(x1 * c[i] - x2 * sn[i]);
        o[i + half] = static_cast<T>(x2 * c[i] + x1 * sn[i]);
      }
      for (int64_t d = s.R; d < s.D; ++d) o[d] = xr[d];
    }
  });
}

}  // namespace

void rotary_embedding_cpu(DType dtype, void* out, const void* x, const int64_t* positions, const float* inv_freq,
                          const RotaryShape& shape) {
  FATHOM_DISPATCH_FLOATING(dtype, "rotary_embedding", [&]<typename T>() {
    rotary(static_cast<T*>(out), static_cast<const T*>(x), positions, inv_freq, shape);
  });
}

}  // namespace fathom::kernels
