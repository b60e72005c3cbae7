// CUDA twins of the reductions (kernels/cpu/reduction_cpu.cpp).
// Layout: any strides. The host merges dims first (kernels::merge_dims), so the common cases
// walk one kept and one reduced dim. The plan (launch::plan_reduction) cuts each output's
// reduced range into chunks; a chunk is reduced either by a 256-thread block (thread t takes
// positions t, t + 256, ... and the block combines its states in a fixed shared-memory tree)
// or by one thread serially when the kept dims are the inner ones (adjacent threads read
// adjacent outputs). Several chunks per output leave partial states in a workspace that a
// second kernel merges in chunk order. No atomics: the same shape gives the same bits.
// Precision: as the CPU — floating-point values accumulate in f64 (f16/bf16/f32 converted
// exactly), integer sums in i64, variance by Welford within a thread and Chan's merge across;
// one rounding to the output dtype. Extrema compare in f64, NaN wins, and ties (and NaNs) go to
// the lowest position, so argmax is the first maximum as on the CPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "core/dtype.h"
#include "kernels/launch_geometry.h"
#include "kernels/reduction_kernels.h"
#include "kernels/welford.h"

namespace fathom::kernels {
namespace {

constexpr int kThreads = launch::kReduceThreads;

template <typename T>
__device__ double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

template <typename Out>
__device__ Out from_double(double v) {
  if constexpr (std::is_same_v<Out, Half> || std::is_same_v<Out, BFloat16>) return Out(static_cast<float>(v));
  else return static_cast<Out>(v);
}

__device__ double quiet_nan() { return std::numeric_limits<double>::quiet_NaN(); }

// Input offset of element `index` (row-major over dims).
__device__ int64_t offset_of(const ReduceDims& dims, int64_t index) {
  if (dims.ndim == 0) return 0;
  if (dims.ndim == 1) return index * dims.strides[0];
  int64_t offset = 0;
  for (int d = dims.ndim - 1; d >= 0; --d) {
    const int64_t size = dims.sizes[d];
    offset += (index % size) * dims.strides[d];
    index /= size;
  }
  return offset;
}

// --- reducers: init / consume one value at a position / merge two states / finish ---
// States have no default member initialisers so they can live in __shared__ arrays.

template <typename T>
struct SumReducer {
  static constexpr bool kIntegral = std::is_integral_v<T>;
  using Acc = std::conditional_t<kIntegral, int64_t, double>;
  struct State {
    Acc total;
  };
  bool squares;
  bool mean;
  double count;

  __device__ State init() const { return State{Acc(0)}; }
  __device__ void consume(State& s, T v, int64_t /*position*/) const {
    if constexpr (kIntegral) {
      s.total += static_cast<int64_t>(v);
    } else {
      const double d = to_double(v);
      s.total += squares ? d * d : d;
    }
  }
  __device__ void merge(State& left, const State& right) const { left.total += right.total; }
  template <typename Out>
  __device__ Out finish(const State& s) const {
    if constexpr (kIntegral) return static_cast<Out>(s.total);
    else return from_double<Out>(mean ? (count > 0 ? s.total / count : quiet_nan()) : s.total);
  }
};

template <typename T, bool kMax>
struct ExtremumReducer {
  struct State {
    double best;
    int64_t index;  // position of the extremum; -1 while nothing was seen
  };
  bool argmax;

  __device__ static bool better(double a, double b) { return kMax ? a > b : a < b; }
  __device__ State init() const {
    return State{kMax ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(), -1};
  }
  // Positions arrive in increasing order within a thread: the first extremum (or NaN) stays.
  __device__ void consume(State& s, T v, int64_t position) const {
    const double x = to_double(v);
    if (s.index >= 0 && s.best != s.best) return;
    if (x != x || better(x, s.best) || s.index < 0) {
      s.best = x;
      s.index = position;
    }
  }
  // States may cover interleaved positions, so ties are broken by position, not by side.
  __device__ void merge(State& left, const State& right) const {
    if (right.index < 0) return;
    if (left.index < 0) {
      left = right;
      return;
    }
    const bool left_nan = left.best != left.best, right_nan = right.best != right.best;
    bool take;
    if (left_nan || right_nan) take = right_nan && (!left_nan || right.index < left.index);
    else if (better(right.best, left.best)) take = true;
    else take = right.best == left.best && right.index < left.index;
    if (take) left = right;
  }
  template <typename Out>
  __device__ Out finish(const State& s) const {
    return argmax ? static_cast<Out>(s.index) : from_double<Out>(s.best);
  }
};

template <typename T>
struct VarianceReducer {
  using State = Welford;
  int64_t correction;

  __device__ State init() const { return Welford{0, 0.0, 0.0}; }
  __device__ void consume(State& s, T v, int64_t /*position*/) const { s.add(to_double(v)); }
  __device__ void merge(State& left, const State& right) const { left.merge(right); }
  template <typename Out>
  __device__ Out finish(const State& s) const {
    return from_double<Out>(s.variance(correction, quiet_nan()));
  }
};

// --- kernels ---

// Reduced positions [begin, end) of chunk `split`.
struct Chunk {
  int64_t begin, end;
};
__device__ Chunk chunk_of(int64_t split, const launch::ReducePlan& plan, int64_t reduced) {
  const int64_t begin = split * plan.chunk;
  const int64_t end = begin + plan.chunk < reduced ? begin + plan.chunk : reduced;
  return Chunk{begin, end};
}

// One block per task (output, split); tasks in output-major order, so partials[task] is
// partials[output * splits + split].
template <typename Reducer, typename T, typename Out>
__global__ void __launch_bounds__(kThreads)
    reduce_block_tasks(Reducer reducer, const T* in, Out* out, typename Reducer::State* partials,
                       ReduceLayoutCuda layout, launch::ReducePlan plan) {
  using State = typename Reducer::State;
  FATHOM_SHARED(shared, State[kThreads]);
  for (int64_t task = blockIdx.x; task < plan.tasks; task += gridDim.x) {
    const int64_t output = task / plan.splits, split = task % plan.splits;
    const T* base = in + offset_of(layout.kept, output);
    const Chunk chunk = chunk_of(split, plan, layout.reduced_numel);
    State state = reducer.init();
    for (int64_t p = chunk.begin + threadIdx.x; p < chunk.end; p += kThreads)
      reducer.consume(state, base[offset_of(layout.reduced, p)], p);
    shared[threadIdx.x] = state;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (static_cast<int>(threadIdx.x) < width) reducer.merge(shared[threadIdx.x], shared[threadIdx.x + width]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (plan.splits == 1) out[output] = reducer.template finish<Out>(shared[0]);
      else partials[task] = shared[0];
    }
    __syncthreads();  // shared[0] is read before the next task overwrites the array
  }
}

// One thread per task; tasks in split-major order so a warp's threads take adjacent outputs.
template <typename Reducer, typename T, typename Out>
__global__ void __launch_bounds__(kThreads)
    reduce_thread_tasks(Reducer reducer, const T* in, Out* out, typename Reducer::State* partials,
                        ReduceLayoutCuda layout, launch::ReducePlan plan) {
  using State = typename Reducer::State;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t task = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; task < plan.tasks;
       task += stride) {
    const int64_t split = task / layout.outputs, output = task % layout.outputs;
    const T* base = in + offset_of(layout.kept, output);
    const Chunk chunk = chunk_of(split, plan, layout.reduced_numel);
    State state = reducer.init();
    for (int64_t p = chunk.begin; p < chunk.end; ++p) reducer.consume(state, base[offset_of(layout.reduced, p)], p);
    if (plan.splits == 1) out[output] = reducer.template finish<Out>(state);
    else partials[output * plan.splits + split] = state;
  }
}

// One thread per output: merges its partials in split order.
template <typename Reducer, typename Out>
__global__ void __launch_bounds__(kThreads)
    reduce_combine(Reducer reducer, const typename Reducer::State* partials, Out* out, int64_t outputs,
                   int64_t splits) {
  using State = typename Reducer::State;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t output = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; output < outputs;
       output += stride) {
    const State* mine = partials + output * splits;
    State state = mine[0];
    for (int64_t s = 1; s < splits; ++s) reducer.merge(state, mine[s]);
    out[output] = reducer.template finish<Out>(state);
  }
}

template <typename Reducer, typename T, typename Out>
void run(const Reducer& reducer, const void* in, void* out, const ReduceLayoutCuda& layout, void* workspace,
         cudaStream_t stream) {
  using State = typename Reducer::State;
  static_assert(sizeof(State) <= launch::kReduceStateBytes, "kReduceStateBytes is too small for this state");
  const launch::ReducePlan plan = reduce_plan(layout);
  if (plan.splits > 1 && workspace == nullptr)
    cuda::fail("reduce: the plan needs a workspace but none was passed", __FILE__, __LINE__);
  auto* partials = static_cast<State*>(workspace);
  const T* typed_in = static_cast<const T*>(in);
  Out* typed_out = static_cast<Out*>(out);
  if (plan.thread_tasks) {
    FATHOM_LAUNCH(launch::grid_stride_blocks(plan.tasks, kThreads), kThreads, 0, stream,
                  reduce_thread_tasks<Reducer, T, Out>)
    (reducer, typed_in, typed_out, partials, layout, plan);
    FATHOM_CUDA_CHECK_LAUNCH("reduce_thread_tasks");
  } else {
    FATHOM_LAUNCH(launch::grid_stride_blocks(plan.tasks, 1), kThreads, 0, stream, reduce_block_tasks<Reducer, T, Out>)
    (reducer, typed_in, typed_out, partials, layout, plan);
    FATHOM_CUDA_CHECK_LAUNCH("reduce_block_tasks");
  }
  if (plan.splits > 1) {
    FATHOM_LAUNCH(launch::grid_stride_blocks(layout.outputs, kThreads), kThreads, 0, stream,
                  reduce_combine<Reducer, Out>)
    (reducer, partials, typed_out, layout.outputs, plan.splits);
    FATHOM_CUDA_CHECK_LAUNCH("reduce_combine");
  }
}

[[noreturn]] void bad_output(const char* op) {
  cuda::fail(op, __FILE__, __LINE__);
}

// Output dtypes, as kernels/reduction.cpp chooses them: floating-point sums keep the input
// dtype (f64 for sum of squares), integer sums and extrema give i64, argmax i64.
template <typename T>
void reduce_typed(ReduceOp op, DType out_dtype, void* out, const void* in, const ReduceLayoutCuda& layout,
                  int64_t correction, void* workspace, cudaStream_t stream) {
  constexpr bool kFloat = !std::is_integral_v<T>;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
    case ReduceOp::SumOfSquares: {
      const SumReducer<T> reducer{op == ReduceOp::SumOfSquares, op == ReduceOp::Mean,
                                  static_cast<double>(layout.reduced_numel)};
      if constexpr (kFloat) {
        if (out_dtype == DType::F64) return run<SumReducer<T>, T, double>(reducer, in, out, layout, workspace, stream);
        if (out_dtype == dtype_of<T>) return run<SumReducer<T>, T, T>(reducer, in, out, layout, workspace, stream);
      } else {
        if (out_dtype == DType::I64)
          return run<SumReducer<T>, T, int64_t>(reducer, in, out, layout, workspace, stream);
      }
      bad_output("reduce (sum): unsupported output dtype on CUDA");
    }
    case ReduceOp::Max:
    case ReduceOp::Min:
    case ReduceOp::ArgMax: {
      auto go = [&](auto reducer) {
        using R = decltype(reducer);
        if (out_dtype == DType::I64) return run<R, T, int64_t>(reducer, in, out, layout, workspace, stream);
        if constexpr (kFloat)
          if (out_dtype == dtype_of<T>) return run<R, T, T>(reducer, in, out, layout, workspace, stream);
        bad_output("reduce (max/min/argmax): unsupported output dtype on CUDA");
      };
      const bool argmax = op == ReduceOp::ArgMax;
      if (op == ReduceOp::Min) return go(ExtremumReducer<T, false>{argmax});
      return go(ExtremumReducer<T, true>{argmax});
    }
    case ReduceOp::Var:
      if constexpr (kFloat) {
        if (out_dtype == dtype_of<T>)
          return run<VarianceReducer<T>, T, T>(VarianceReducer<T>{correction}, in, out, layout, workspace, stream);
      }
      bad_output("reduce (var): needs a floating-point input and output of the same dtype on CUDA");
  }
  bad_output("reduce: unknown reduction");
}

}  // namespace

void reduce_cuda(ReduceOp op, DType in_dtype, DType out_dtype, void* out, const void* in,
                 const ReduceLayoutCuda& layout, int64_t correction, void* workspace, void* stream) {
  if (layout.outputs == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (in_dtype) {
    case DType::F32: return reduce_typed<float>(op, out_dtype, out, in, layout, correction, workspace, s);
    case DType::F64: return reduce_typed<double>(op, out_dtype, out, in, layout, correction, workspace, s);
    case DType::F16: return reduce_typed<Half>(op, out_dtype, out, in, layout, correction, workspace, s);
    case DType::BF16: return reduce_typed<BFloat16>(op, out_dtype, out, in, layout, correction, workspace, s);
    case DType::I32: return reduce_typed<int32_t>(op, out_dtype, out, in, layout, correction, workspace, s);
    case DType::I64: return reduce_typed<int64_t>(op, out_dtype, out, in, layout, correction, workspace, s);
    case DType::Bool: break;
  }
  bad_output("reduce: bool tensors are not supported");
}

namespace {

// partials[c] = sum of squares of chunk c of the list (f64, fixed thread order and tree).
__global__ void __launch_bounds__(kThreads)
    squares_chunk_kernel(const SquaresTensor* table, int64_t count, int64_t total_chunks, double* partials) {
  FATHOM_SHARED(shared, double[kThreads]);
  for (int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const int64_t owner = launch::chunk_owner([table](int64_t k) { return table[k].first_chunk; }, count, c);
    const SquaresTensor t = table[owner];
    const int64_t start = (c - t.first_chunk) * kSquaresChunk;
    const int64_t end = start + kSquaresChunk < t.n ? start + kSquaresChunk : t.n;
    double sum = 0;
    for (int64_t i = start + threadIdx.x; i < end; i += kThreads) {
      const double v = t.data[i];
      sum += v * v;
    }
    shared[threadIdx.x] = sum;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (static_cast<int>(threadIdx.x) < width) shared[threadIdx.x] += shared[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) partials[c] = shared[0];
    __syncthreads();  // shared[0] is read before the next chunk overwrites the array
  }
}

// *table[k].out = tensor k's chunks summed in order.
__global__ void __launch_bounds__(kThreads)
    squares_combine_kernel(const SquaresTensor* table, int64_t count, const double* partials) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count; k += stride) {
    const SquaresTensor t = table[k];
    double sum = 0;
    for (int64_t c = 0; c < squares_chunks(t.n); ++c) sum += partials[t.first_chunk + c];
    *t.out = sum;
  }
}

}  // namespace

void sum_of_squares_multi_cuda(const SquaresTensor* tensors, int64_t count, void* table, double* partials,
                               void* stream) {
  if (count == 0) return;
  std::vector<SquaresTensor> entries(tensors, tensors + count);
  int64_t total_chunks = 0;
  for (SquaresTensor& entry : entries) {
    entry.first_chunk = total_chunks;
    total_chunks += squares_chunks(entry.n);
  }
  const auto s = static_cast<cudaStream_t>(stream);
  // A pageable source: the call returns once `entries` has been read, so it may go out of scope.
  const cudaError_t status =
      cudaMemcpyAsync(table, entries.data(), entries.size() * sizeof(SquaresTensor), cudaMemcpyHostToDevice, s);
  if (status != cudaSuccess)
    cuda::fail((std::string("global_norm: copying the tensor table failed: ") + cudaGetErrorString(status)).c_str(),
               __FILE__, __LINE__);
  const auto* device_table = static_cast<const SquaresTensor*>(table);
  FATHOM_LAUNCH(launch::grid_stride_blocks(total_chunks, 1), kThreads, 0, s, squares_chunk_kernel)
  (device_table, count, total_chunks, partials);
  FATHOM_CUDA_CHECK_LAUNCH("squares_chunk_kernel");
  FATHOM_LAUNCH(launch::grid_stride_blocks(count, kThreads), kThreads, 0, s, squares_combine_kernel)
  (device_table, count, partials);
  FATHOM_CUDA_CHECK_LAUNCH("squares_combine_kernel");
}

}  // namespace fathom::kernels
