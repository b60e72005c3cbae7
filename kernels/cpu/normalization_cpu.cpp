// CPU layernorm and rmsnorm over the last dim of contiguous (N, C) rows.
// Layout: forward and dinp are row-parallel. dweight/dbias are sums over rows: the rows are cut
// into blocks whose boundaries depend on N only (never on the thread count); each block sums
// its rows in order into its own f32/f64 partial row, and the partials are then added in block
// order, column-parallel. So the result is bit-identical for any thread count.
// Precision: 16-bit rows are converted to f32; mean and variance use two passes over the row
// (no E[x^2] - E[x]^2 cancellation); statistics are kept in the compute type.
#include <cmath>

#include "kernels/cpu/nn_cpu_common.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {
using namespace nn_cpu;

// Row blocks for the dweight/dbias partial sums: at most kMaxBlocks blocks of at least
// kMinBlockRows rows, chosen from N alone.
struct RowBlocks {
  int64_t rows_per_block;
  int64_t count;
  explicit RowBlocks(int64_t N) {
    constexpr int64_t kMaxBlocks = 64, kMinBlockRows = 8;
    rows_per_block = std::max(kMinBlockRows, (N + kMaxBlocks - 1) / kMaxBlocks);
    count = (N + rows_per_block - 1) / rows_per_block;
  }
};

// Runs block_fn(block, begin, end) over the row blocks in parallel.
template <typename Fn>
void parallel_blocks(const RowBlocks& blocks, int64_t N, int64_t C, Fn&& block_fn) {
  parallel_rows(blocks.count, blocks.rows_per_block * C * 8, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b)
      block_fn(b, b * blocks.rows_per_block, std::min(N, (b + 1) * blocks.rows_per_block));
  });
}

// dst[c] (+)= sum over blocks, in block order, of partials[b * C + c].
template <typename T, typename A>
void combine_partials(T* dst, const std::vector<A>& partials, int64_t blocks, int64_t C, bool accumulate) {
  parallel_rows(C, blocks, [&](int64_t begin, int64_t end) {
    std::vector<A> sum(end - begin, A(0));
    for (int64_t b = 0; b < blocks; ++b) {
      const A* part = partials.data() + b * C + begin;
      for (int64_t c = 0; c < end - begin; ++c) sum[c] += part[c];
    }
    store_row(dst + begin, sum.data(), end - begin, accumulate);
  });
}

template <typename T>
void layernorm_forward(T* out, Acc<T>* mean, Acc<T>* rstd, const T* inp, const T* weight, const T* bias, int64_t N,
                       int64_t C, double eps) {
  using A = Acc<T>;
  parallel_rows(N, 6 * C, [&](int64_t begin, int64_t end) {
    std::vector<A> x_scratch, w_scratch, b_scratch, y_scratch(kIsAcc<T> ? 0 : C);
    const A* w = weight ? load_row(weight, C, w_scratch) : nullptr;
    const A* b = bias ? load_row(bias, C, b_scratch) : nullptr;
    for (int64_t r = begin; r < end; ++r) {
      prefetch_row_ahead(inp, r, end, C);
      const A* x = load_row(inp + r * C, C, x_scratch);
      const A m = row_sum(x, C) / A(C);
      const A var = lane_sum<A>(C, [&](int64_t i) { return (x[i] - m) * (x[i] - m); }) / A(C);
      const A s = A(1) / std::sqrt(var + A(eps));
      // One pass writes the row (straight into out for f32/f64); the affine cases are separate
      // loops so each vectorises without a branch per element.
      A* y = kIsAcc<T> ? reinterpret_cast<A*>(out + r * C) : y_scratch.data();
      if (w && b)
        for (int64_t i = 0; i < C; ++i) y[i] = (x[i] - m) * s * w[i] + b[i];
      else if (w)
        for (int64_t i = 0; i < C; ++i) y[i] = (x[i] - m) * s * w[i];
      else if (b)
        for (int64_t i = 0; i < C; ++i) y[i] = (x[i] - m) * s + b[i];
      else
        for (int64_t i = 0; i < C; ++i) y[i] = (x[i] - m) * s;
      if constexpr (!kIsAcc<T>) store_row(out + r * C, y, C, /*accumulate=*/false);
      mean[r] = m;
      rstd[r] = s;
    }
  });
}

template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const Acc<T>* mean,
                        const Acc<T>* rstd, const Acc<T>* dmean, const Acc<T>* drstd, int64_t N, int64_t C,
                        bool accumulate) {
  using A = Acc<T>;
  const RowBlocks blocks(N);
  std::vector<A> dw_partials(dweight ? blocks.count * C : 0, A(0));
  std::vector<A> db_partials(dbias ? blocks.count * C : 0, A(0));
  parallel_blocks(blocks, N, C, [&](int64_t block, int64_t begin, int64_t end) {
    std::vector<A> dy_scratch, x_scratch, w_scratch, xhat(C), g(C);
    const A* w = weight ? load_row(weight, C, w_scratch) : nullptr;
    A* dw = dweight ? dw_partials.data() + block * C : nullptr;
    A* db = dbias ? db_partials.data() + block * C : nullptr;
    for (int64_t r = begin; r < end; ++r) {
      const A* dy = load_row(dout + r * C, C, dy_scratch);
      const A* x = load_row(inp + r * C, C, x_scratch);
      const A m = mean[r], s = rstd[r];
      for (int64_t i = 0; i < C; ++i) xhat[i] = (x[i] - m) * s;
      if (dw)
        for (int64_t i = 0; i < C; ++i) dw[i] += dy[i] * xhat[i];
      if (db)
        for (int64_t i = 0; i < C; ++i) db[i] += dy[i];
      if (!dinp) continue;
      // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w, plus the paths
      // through the saved statistics: dmean / C and drstd * (-rstd^2 * xhat / C).
      for (int64_t i = 0; i < C; ++i) g[i] = w ? dy[i] * w[i] : dy[i];
      const A g_mean = row_sum(g.data(), C) / A(C);
      const A gx_mean = lane_sum<A>(C, [&](int64_t i) { return g[i] * xhat[i]; }) / A(C);
      const A stat_shift = dmean ? dmean[r] / A(C) : A(0);
      const A stat_slope = drstd ? -drstd[r] * s * s / A(C) : A(0);
      for (int64_t i = 0; i < C; ++i)
        g[i] = s * (g[i] - g_mean - xhat[i] * gx_mean) + stat_shift + stat_slope * xhat[i];
      store_row(dinp + r * C, g.data(), C, accumulate);
    }
  });
  if (dweight) combine_partials(dweight, dw_partials, blocks.count, C, accumulate);
  if (dbias) combine_partials(dbias, db_partials, blocks.count, C, accumulate);
}

template <typename T>
void rmsnorm_forward(T* out, Acc<T>* rstd, const T* inp, const T* weight, int64_t N, int64_t C, double eps) {
  using A = Acc<T>;
  parallel_rows(N, 4 * C, [&](int64_t begin, int64_t end) {
    std::vector<A> x_scratch, w_scratch, y(C);
    const A* w = weight ? load_row(weight, C, w_scratch) : nullptr;
    for (int64_t r = begin; r < end; ++r) {
      const A* x = load_row(inp + r * C, C, x_scratch);
      const A ms = lane_sum<A>(C, [&](int64_t i) { return x[i] * x[i]; }) / A(C);
      const A s = A(1) / std::sqrt(ms + A(eps));
      for (int64_t i = 0; i < C; ++i) y[i] = x[i] * s;
      if (w)
        for (int64_t i = 0; i < C; ++i) y[i] *= w[i];
      store_row(out + r * C, y.data(), C, /*accumulate=*/false);
      rstd[r] = s;
    }
  });
}

template <typename T>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const Acc<T>* rstd,
                      const Acc<T>* drstd, int64_t N, int64_t C, bool accumulate) {
  using A = Acc<T>;
  const RowBlocks blocks(N);
  std::vector<A> dw_partials(dweight ? blocks.count * C : 0, A(0));
  parallel_blocks(blocks, N, C, [&](int64_t block, int64_t begin, int64_t end) {
    std::vector<A> dy_scratch, x_scratch, w_scratch, xhat(C), g(C);
    const A* w = weight ? load_row(weight, C, w_scratch) : nullptr;
    A* dw = dweight ? dw_partials.data() + block * C : nullptr;
    for (int64_t r = begin; r < end; ++r) {
      const A* dy = load_row(dout + r * C, C, dy_scratch);
      const A* x = load_row(inp + r * C, C, x_scratch);
      const A s = rstd[r];
      for (int64_t i = 0; i < C; ++i) xhat[i] = x[i] * s;
      if (dw)
        for (int64_t i = 0; i < C; ++i) dw[i] += dy[i] * xhat[i];
      if (!dinp) continue;
      // dx = rstd * (g - xhat * mean(g * xhat)) with g = dy * w, plus drstd * (-rstd^2 * xhat / C).
      for (int64_t i = 0; i < C; ++i) g[i] = w ? dy[i] * w[i] : dy[i];
      const A gx_mean = lane_sum<A>(C, [&](int64_t i) { return g[i] * xhat[i]; }) / A(C);
      const A stat_slope = drstd ? -drstd[r] * s * s / A(C) : A(0);
      for (int64_t i = 0; i < C; ++i) g[i] = s * (g[i] - xhat[i] * gx_mean) + stat_slope * xhat[i];
      store_row(dinp + r * C, g.data(), C, accumulate);
    }
  });
  if (dweight) combine_partials(dweight, dw_partials, blocks.count, C, accumulate);
}

}  // namespace

void layernorm_forward_cpu(DType dtype, void* out, void* mean, void* rstd, const void* inp, const void* weight,
                           const void* bias, int64_t N, int64_t C, double eps) {
  FATHOM_DISPATCH_FLOATING(dtype, "layernorm", [&]<typename T>() {
    using A = Acc<T>;
    layernorm_forward(static_cast<T*>(out), static_cast<A*>(mean), static_cast<A*>(rstd), static_cast<const T*>(inp),
                      static_cast<const T*>(weight), static_cast<const T*>(bias), N, C, eps);
  });
}

void layernorm_backward_cpu(DType dtype, void* dinp, void* dweight, void* dbias, const void* dout, const void* inp,
                            const void* weight, const void* mean, const void* rstd, const void* dmean,
                            const void* drstd, int64_t N, int64_t C, bool accumulate) {
  FATHOM_DISPATCH_FLOATING(dtype, "layernorm_backward", [&]<typename T>() {
    using A = Acc<T>;
    layernorm_backward(static_cast<T*>(dinp), static_cast<T*>(dweight), static_cast<T*>(dbias),
                       static_cast<const T*>(dout), static_cast<const T*>(inp), static_cast<const T*>(weight),
                       static_cast<const A*>(mean), static_cast<const A*>(rstd), static_cast<const A*>(dmean),
                       static_cast<const A*>(drstd), N, C, accumulate);
  });
}

void rmsnorm_forward_cpu(DType dtype, void* out, void* rstd, const void* inp, const void* weight, int64_t N, int64_t C,
                         double eps) {
  FATHOM_DISPATCH_FLOATING(dtype, "rmsnorm", [&]<typename T>() {
    rmsnorm_forward(static_cast<T*>(out), static_cast<Acc<T>*>(rstd), static_cast<const T*>(inp),
                    static_cast<const T*>(weight), N, C, eps);
  });
}

void rmsnorm_backward_cpu(DType dtype, void* dinp, void* dweight, const void* dout, const void* inp, const void* weight,
                          const void* rstd, const void* drstd, int64_t N, int64_t C, bool accumulate) {
  FATHOM_DISPATCH_FLOATING(dtype, "rmsnorm_backward", [&]<typename T>() {
    using A = Acc<T>;
    rmsnorm_backward(static_cast<T*>(dinp), static_cast<T*>(dweight), static_cast<const T*>(dout),
                     static_cast<const T*>(inp), static_cast<const T*>(weight), static_cast<const A*>(rstd),
                     static_cast<const A*>(drstd), N, C, accumulate);
  });
}

}  // namespace fathom::kernels
