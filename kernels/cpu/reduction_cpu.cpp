// CPU reductions.
//
// Determinism: the reduced range of each output element is cut into chunks of kChunk elements
// (fixed boundaries, independent of the thread count). Each chunk's partial state is computed
// by whichever thread gets it, always by the same code, and the partials are merged left to
// right. Contiguous runs are summed with eight interleaved accumulators (fixed pattern) so the
// loop pipelines without reassociating differently from run to run.
// Precision: floating-point values accumulate in f64; integer sums in i64. Variance uses
// Welford's update within a chunk and Chan et al.'s pairwise merge across chunks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/error.h"
#include "core/strided_loop.h"
#include "core/threads.h"
#include "kernels/reduction_kernels.h"
#include "kernels/welford.h"

namespace fathom::kernels {
namespace {

constexpr int64_t kChunk = 8192;

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

template <typename Out>
Out from_double(double v) {
  if constexpr (std::is_same_v<Out, Half> || std::is_same_v<Out, BFloat16>) return Out(static_cast<float>(v));
  else return static_cast<Out>(v);
}

// --- reducers: init / consume a strided run / merge (left, right) / finish ---

template <typename T>
struct SumReducer {
  static constexpr bool kIntegral = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  using Acc = std::conditional_t<kIntegral, int64_t, double>;
  struct State {
    Acc total = 0;
  };
  bool squares = false;
  State init() const { return {}; }
  void consume(State& s, const T* p, int64_t n, int64_t stride, int64_t /*first*/) const {
    Acc lanes[8] = {};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
      for (int k = 0; k < 8; ++k) lanes[k] += value(p[(j + k) * stride]);
    for (; j < n; ++j) lanes[j & 7] += value(p[j * stride]);
    s.total += ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  }
  Acc value(T v) const {
    if constexpr (kIntegral) return static_cast<Acc>(v);
    else {
      const double d = to_double(v);
      return squares ? d * d : d;
    }
  }
  void merge(State& left, const State& right) const { left.total += right.total; }
};

template <typename T, bool kMax>
struct ExtremumReducer {
  struct State {
    double best = kMax ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    int64_t index = -1;  // position (in reduced order) of the first extremum
  };
  State init() const { return {}; }
  void consume(State& s, const T* p, int64_t n, int64_t stride, int64_t first) const {
    for (int64_t j = 0; j < n; ++j) {
      const double v = to_double(p[j * stride]);
      if (std::isnan(s.best)) return;  // NaN wins and stays
      if (std::isnan(v) || (kMax ? v > s.best : v < s.best) || s.index < 0) {
        s.best = v;
        s.index = first + j;
      }
    }
  }
  void merge(State& left, const State& right) const {
    if (right.index < 0 || std::isnan(left.best)) return;
    if (left.index < 0 || std::isnan(right.best) || (kMax ? right.best > left.best : right.best < left.best))
      left = right;
  }
};

template <typename T>
struct VarianceReducer {
  using State = Welford;
  State init() const { return Welford{}; }
  void consume(State& s, const T* p, int64_t n, int64_t stride, int64_t /*first*/) const {
    for (int64_t j = 0; j < n; ++j) s.add(to_double(p[j * stride]));
  }
  void merge(State& left, const State& right) const { left.merge(right); }
};

// Runs one reducer over every output element; `finish(state)` gives the stored value.
template <typename Reducer, typename T, typename Out, typename Finish>
void reduce_all(const Reducer& reducer, const T* in, Out* out, const ReduceLayout& layout, Finish&& finish) {
  using State = typename Reducer::State;
  const int64_t outputs = shape_numel(layout.kept_sizes);
  const int64_t reduced = shape_numel(layout.reduced_sizes);
  const int64_t chunks = std::max<int64_t>(1, (reduced + kChunk - 1) / kChunk);
  const Strides kept_contiguous = contiguous_strides(layout.kept_sizes);

  auto input_offset = [&](int64_t o) {
    int64_t offset = 0;
    for (size_t d = 0; d < layout.kept_sizes.size(); ++d)
      offset += (o / kept_contiguous[d]) % layout.kept_sizes[d] * layout.kept_strides[d];
    return offset;
  };
  auto chunk_state = [&](int64_t o, int64_t c) {
    State state = reducer.init();
    const int64_t begin = c * kChunk, end = std::min(reduced, begin + kChunk);
    int64_t position = begin;
    for_each_strided_range<1>(layout.reduced_sizes, {&layout.reduced_strides}, begin, end, {input_offset(o)},
                              [&](const std::array<int64_t, 1>& at, int64_t n, const std::array<int64_t, 1>& step) {
                                reducer.consume(state, in + at[0], n, step[0], position);
                                position += n;
                              });
    return state;
  };

  const int64_t tasks = outputs * chunks;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), std::max<int64_t>(1, tasks * std::min(reduced, kChunk) / 16384)));
  if (chunks == 1) {
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t o = 0; o < outputs; ++o) out[o] = finish(chunk_state(o, 0));
    return;
  }
  std::vector<State> partials(static_cast<size_t>(tasks));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t task = 0; task < tasks; ++task) partials[task] = chunk_state(task / chunks, task % chunks);
  for (int64_t o = 0; o < outputs; ++o) {
    State total = partials[o * chunks];
    for (int64_t c = 1; c < chunks; ++c) reducer.merge(total, partials[o * chunks + c]);
    out[o] = finish(total);
  }
}

// Sums over the rows of a dense (rows x columns) block, one sum per column (a bias gradient):
// reduce_all walks each column down its stride, a cache line per element, which made this a
// tenth of a small GPT's step. Here threads take blocks of columns and sweep them row by row,
// keeping for each column the very accumulators reduce_all would (lane = row % 8 within a
// kChunk-row chunk, lanes combined in the same tree, chunks added left to right), so the
// result is the same bits. False (nothing done) for any other layout.
template <typename T, typename Out, typename Finish>
bool reduce_columns(const SumReducer<T>& reducer, const T* in, Out* out, const ReduceLayout& layout,
                    Finish&& finish) {
  using Acc = typename SumReducer<T>::Acc;
  using State = typename SumReducer<T>::State;
  if (layout.kept_sizes.size() != 1 || layout.reduced_sizes.size() != 1 || layout.kept_strides[0] != 1 ||
      layout.reduced_strides[0] < layout.kept_sizes[0])
    return false;
  const int64_t columns = layout.kept_sizes[0], rows = layout.reduced_sizes[0], ld = layout.reduced_strides[0];
  constexpr int64_t kBlock = 256;
  if (columns < 16 || rows < 16) return false;
  const int64_t blocks = (columns + kBlock - 1) / kBlock;
  const int threads = static_cast<int>(std::clamp<int64_t>(rows * columns / 16384, 1, std::min<int64_t>(num_threads(), blocks)));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kBlock, width = std::min(kBlock, columns - c0);
    Acc lanes[8][kBlock];
    State total[kBlock];
    for (int64_t begin = 0; begin < rows; begin += kChunk) {
      const int64_t end = std::min(rows, begin + kChunk);
      for (auto& lane : lanes) std::fill(lane, lane + width, Acc(0));
      for (int64_t r = begin; r < end; ++r) {
        const T* row = in + r * ld + c0;
        Acc* lane = lanes[(r - begin) & 7];
        for (int64_t c = 0; c < width; ++c) lane[c] += reducer.value(row[c]);
      }
      for (int64_t c = 0; c < width; ++c) {
        State chunk = reducer.init();
        chunk.total += ((lanes[0][c] + lanes[1][c]) + (lanes[2][c] + lanes[3][c])) +
                       ((lanes[4][c] + lanes[5][c]) + (lanes[6][c] + lanes[7][c]));
        if (begin == 0) total[c] = chunk;
        else reducer.merge(total[c], chunk);
      }
    }
    for (int64_t c = 0; c < width; ++c) out[c0 + c] = finish(total[c]);
  }
  return true;
}

template <typename T, typename Out>
void reduce_typed(ReduceOp op, const T* in, Out* out, const ReduceLayout& layout, int64_t correction) {
  const double count = static_cast<double>(shape_numel(layout.reduced_sizes));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
    case ReduceOp::SumOfSquares: {
      SumReducer<T> reducer;
      reducer.squares = op == ReduceOp::SumOfSquares;
      const bool mean = op == ReduceOp::Mean;
      auto finish = [&](const typename SumReducer<T>::State& s) {
        if constexpr (SumReducer<T>::kIntegral) return static_cast<Out>(s.total);
        else return from_double<Out>(mean ? (count > 0 ? s.total / count : nan) : s.total);
      };
      if (!reduce_columns(reducer, in, out, layout, finish)) reduce_all(reducer, in, out, layout, finish);
      return;
    }
    case ReduceOp::Max:
    case ReduceOp::Min:
    case ReduceOp::ArgMax: {
      const bool argmax = op == ReduceOp::ArgMax;
      auto finish = [&](const auto& s) {
        return argmax ? static_cast<Out>(s.index) : from_double<Out>(s.best);
      };
      if (op == ReduceOp::Min) reduce_all(ExtremumReducer<T, false>{}, in, out, layout, finish);
      else reduce_all(ExtremumReducer<T, true>{}, in, out, layout, finish);
      return;
    }
    case ReduceOp::Var:
      reduce_all(VarianceReducer<T>{}, in, out, layout, [&](const typename VarianceReducer<T>::State& s) {
        return from_double<Out>(s.variance(correction, nan));
      });
      return;
  }
}

}  // namespace

void reduce_cpu(ReduceOp op, DType in_dtype, DType out_dtype, void* out, const void* in, const ReduceLayout& layout,
                int64_t correction) {
  dispatch_dtype(in_dtype, "reduce", [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      FATHOM_FAIL("reduce: bool tensors are not supported");
    } else {
      dispatch_dtype(out_dtype, "reduce", [&]<typename Out>() {
        if constexpr (std::is_same_v<Out, bool>) FATHOM_FAIL("reduce: bool output is not supported");
        else reduce_typed<T, Out>(op, static_cast<const T*>(in), static_cast<Out*>(out), layout, correction);
      });
    }
  });
}

}  // namespace fathom::kernels
