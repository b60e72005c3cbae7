// CUDA twins of the embedding lookup and its backward (kernels/cpu/embedding_cpu.cpp).
// Layout: weight/dweight (V, C) and out/dout (N, C) contiguous; indices i32 or i64 (N).
// Forward: one thread per 16-byte vector of an output row (element by element when a row or a
// pointer is not 16-byte aligned), grid-stride. An out-of-range index writes zeros and records
// its position with an integer atomicMin, so the caller reports the first bad position, as the
// CPU does.
// Backward, deterministic (no float atomics): (1) count each token's positions with integer
// atomics, range-checking every index; (2) an exclusive prefix sum of the counts in one block
// gives each token's bucket start; (3) a stable radix sort of (token, position) pairs (CUB) puts
// each bucket's positions in increasing order; (4) a block per (token, column tile) sums its
// dout rows in that order and stores once. That is the CPU's order exactly, so results match it
// bit for bit. Precision: f16/bf16/f32 sum in f32, f64 in f64, rounded once on store.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#if defined(FATHOM_CUDA_EMULATION)
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/simt/submit.h"
#else
#include <cub/device/device_radix_sort.cuh>
#endif

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "core/dtype.h"
#include "kernels/cuda/row_ops.cuh"
#include "kernels/launch_geometry.h"
#include "kernels/nn_kernels.h"

#if defined(FATHOM_CUDA_EMULATION)
// CUB has no host build. In the CUDA emulation its radix sort of pairs is a stable sort on the
// host by the same key bits: the same output, since both sorts are stable. Like the GPU's, it
// runs in its stream's order (after the kernels that wrote its keys).
namespace fathom_emulated_cub {
struct DeviceRadixSort {
  template <typename K, typename V>
  static cudaError_t SortPairs(void* temp, size_t& bytes, const K* keys_in, K* keys_out, const V* values_in,
                               V* values_out, int n, int begin_bit, int end_bit, cudaStream_t stream = nullptr) {
    if (temp == nullptr) {
      bytes = 1;  // a workspace query
      return cudaSuccess;
    }
    fathom::simt::submit(stream, [=] {
      const auto bits = [&](K key) {
        const int width = end_bit - begin_bit;
        return width >= static_cast<int>(8 * sizeof(K)) ? key : (key >> begin_bit) & ((K{1} << width) - 1);
      };
      std::vector<int> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return bits(keys_in[a]) < bits(keys_in[b]); });
      for (int i = 0; i < n; ++i) {
        keys_out[i] = keys_in[order[i]];
        values_out[i] = values_in[order[i]];
      }
    });
    return cudaSuccess;
  }
};
}  // namespace fathom_emulated_cub
namespace cub = fathom_emulated_cub;
#endif

namespace fathom::kernels {
namespace {

using rows::Acc;
using rows::Pack;

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;
constexpr unsigned long long kNoBadPosition = ~0ull;  // the flag's initial bytes (0xFF): -1 as int64

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    cuda::fail((std::string("embedding on CUDA: ") + what + " failed: " + cudaGetErrorString(status)).c_str(),
               __FILE__, __LINE__);
}

template <typename I>
__device__ bool in_range(I index, int64_t V) {
  return static_cast<int64_t>(index) >= 0 && static_cast<int64_t>(index) < V;
}

// Item i is vector j of output row n; rows of C == 0 still get one item so their index is checked.
template <typename T, typename I, int W>
__global__ void __launch_bounds__(kThreads)
    embedding_forward_kernel(T* out, const I* indices, const T* weight, int64_t N, int64_t V, int64_t C,
                             unsigned long long* bad_position) {
  const int64_t packs = C / W;
  const int64_t per_row = packs > 0 ? packs : 1;
  const int64_t items = N * per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += stride) {
    const int64_t n = i / per_row, j = i % per_row;
    const I index = indices[n];
    const bool valid = in_range(index, V);
    if (!valid && j == 0) atomicMin(bad_position, static_cast<unsigned long long>(n));
    if (j >= packs) continue;
    Pack<T, W> p = {};
    if (valid) p = reinterpret_cast<const Pack<T, W>*>(weight + static_cast<int64_t>(index) * C)[j];
    reinterpret_cast<Pack<T, W>*>(out + n * C)[j] = p;
  }
}

// counts (V + 1, zeroed) gets each token's number of positions; keys/positions the sort's input.
// Out-of-range indices are flagged, not counted, and sorted into the bucket V nobody reads.
template <typename I>
__global__ void __launch_bounds__(kThreads)
    embedding_count_kernel(const I* indices, int64_t N, int64_t V, int32_t* counts, uint32_t* keys,
                           int32_t* positions, unsigned long long* bad_position) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; n < N; n += stride) {
    const I index = indices[n];
    const bool valid = in_range(index, V);
    if (valid) atomicAdd(counts + static_cast<int64_t>(index), 1);
    else atomicMin(bad_position, static_cast<unsigned long long>(n));
    keys[n] = static_cast<uint32_t>(valid ? static_cast<int64_t>(index) : V);
    positions[n] = static_cast<int32_t>(n);
  }
}

// In-place exclusive prefix sum of data[0, n) by one block: each thread sums a contiguous
// segment, thread 0 scans the segment sums, each thread rescans its segment. Integers: exact.
__global__ void __launch_bounds__(kScanThreads) exclusive_scan_kernel(int32_t* data, int64_t n) {
  FATHOM_SHARED(partial, int32_t[kScanThreads]);
  const int64_t per_thread = (n + blockDim.x - 1) / blockDim.x;
  const int64_t begin_unclamped = static_cast<int64_t>(threadIdx.x) * per_thread;
  const int64_t begin = begin_unclamped < n ? begin_unclamped : n;
  const int64_t end = begin + per_thread < n ? begin + per_thread : n;
  int32_t sum = 0;
  for (int64_t i = begin; i < end; ++i) sum += data[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t run = 0;
    for (int t = 0; t < static_cast<int>(blockDim.x); ++t) {
      const int32_t v = partial[t];
      partial[t] = run;
      run += v;
    }
  }
  __syncthreads();
  int32_t run = partial[threadIdx.x];
  for (int64_t i = begin; i < end; ++i) {
    const int32_t v = data[i];
    data[i] = run;
    run += v;
  }
}

// Task = (token v, column tile); each thread owns one vector of the tile and adds the token's
// dout rows in position order (first[v] .. first[v + 1] of the sorted positions).
template <typename T, int W>
__global__ void __launch_bounds__(launch::kEmbeddingMaxThreads)
    embedding_sum_kernel(T* dweight, const T* dout, const int32_t* first, const int32_t* positions, int64_t V,
                         int64_t C, int64_t tiles, bool accumulate, const unsigned long long* bad_position) {
  using A = Acc<T>;
  if (*bad_position != kNoBadPosition) return;  // the caller throws; dweight stays as it was
  const int64_t packs = C / W;
  for (int64_t task = blockIdx.x; task < V * tiles; task += gridDim.x) {
    const int64_t v = task / tiles;
    const int64_t j = (task % tiles) * blockDim.x + threadIdx.x;
    if (j >= packs) continue;
    const int32_t begin = first[v], end = first[v + 1];
    if (begin == end && accumulate) continue;
    A sum[W];
#pragma unroll
    for (int k = 0; k < W; ++k) sum[k] = A(0);
    for (int32_t p = begin; p < end; ++p) {
      A row[W];
      rows::load<W>(dout + static_cast<int64_t>(positions[p]) * C, j, row);
#pragma unroll
      for (int k = 0; k < W; ++k) sum[k] += row[k];
    }
    rows::store<W>(dweight + v * C, j, sum, accumulate);
  }
}

template <typename Fn>
void dispatch(DType dtype, DType index_dtype, const char* op, Fn&& fn) {
  auto with_index = [&](auto value_tag) {
    switch (index_dtype) {
      case DType::I64: return fn(value_tag, int64_t{});
      case DType::I32: return fn(value_tag, int32_t{});
      default: cuda::fail((std::string(op) + ": indices must be i64 or i32").c_str(), __FILE__, __LINE__);
    }
  };
  switch (dtype) {
    case DType::F32: return with_index(float{});
    case DType::F64: return with_index(double{});
    case DType::F16: return with_index(Half{});
    case DType::BF16: return with_index(BFloat16{});
    default: break;
  }
  cuda::fail((std::string(op) + ": needs a floating-point dtype (f32, f64, f16, bf16)").c_str(), __FILE__, __LINE__);
}

// Calls fn(std::integral_constant<int, W>{}) with W the elements per access for these rows.
template <typename T, typename Fn>
void with_width(int64_t C, bool aligned, Fn&& fn) {
  constexpr int kWide = 16 / static_cast<int>(sizeof(T));
  if (launch::vector_width(C, sizeof(T), aligned) == kWide) fn(std::integral_constant<int, kWide>{});
  else fn(std::integral_constant<int, 1>{});
}

size_t sort_temp_bytes(int64_t N, int64_t V) {
  size_t bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                        static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                        static_cast<int32_t*>(nullptr), static_cast<int>(N), 0,
                                        launch::embedding_sort_bits(V)),
        "the sort's workspace query");
  return bytes;
}

}  // namespace

void embedding_forward_cuda(DType dtype, DType index_dtype, void* out, const void* indices, const void* weight,
                            int64_t N, int64_t V, int64_t C, int64_t* bad_position, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  check(cudaMemsetAsync(bad_position, 0xFF, sizeof(int64_t), s), "clearing the index flag");
  if (N == 0) return;
  const bool aligned = rows::aligned16(out) && rows::aligned16(weight);
  auto* flag = reinterpret_cast<unsigned long long*>(bad_position);
  dispatch(dtype, index_dtype, "embedding", [&](auto value_tag, auto index_tag) {
    using T = decltype(value_tag);
    using I = decltype(index_tag);
    with_width<T>(C, aligned, [&](auto width) {
      constexpr int W = decltype(width)::value;
      const int64_t packs = C / W;
      const int blocks = launch::grid_stride_blocks(N * (packs > 0 ? packs : 1), kThreads);
      FATHOM_LAUNCH(blocks, kThreads, 0, s, embedding_forward_kernel<T, I, W>)
      (static_cast<T*>(out), static_cast<const I*>(indices), static_cast<const T*>(weight), N, V, C, flag);
    });
  });
  FATHOM_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

int64_t embedding_backward_workspace_bytes_cuda(int64_t N, int64_t V) {
  const int64_t temp = N > 0 ? static_cast<int64_t>(sort_temp_bytes(N, V)) : 0;
  return launch::embedding_workspace(N, V, temp).bytes;
}

void embedding_backward_cuda(DType dtype, DType index_dtype, void* dweight, const void* dout, const void* indices,
                             int64_t N, int64_t V, int64_t C, bool accumulate, int64_t* bad_position,
                             void* workspace, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  check(cudaMemsetAsync(bad_position, 0xFF, sizeof(int64_t), s), "clearing the index flag");
  dispatch(dtype, index_dtype, "embedding_backward", [&](auto value_tag, auto index_tag) {
    using T = decltype(value_tag);
    using I = decltype(index_tag);
    if (N == 0) {  // no positions: every row's sum is zero
      if (!accumulate && V * C > 0) check(cudaMemsetAsync(dweight, 0, V * C * sizeof(T), s), "zeroing dweight");
      return;
    }
    const size_t temp_bytes = sort_temp_bytes(N, V);
    const launch::EmbeddingWorkspace w = launch::embedding_workspace(N, V, static_cast<int64_t>(temp_bytes));
    char* base = static_cast<char*>(workspace);
    auto* first = reinterpret_cast<int32_t*>(base + w.first);
    auto* keys_in = reinterpret_cast<uint32_t*>(base + w.keys_in);
    auto* keys_out = reinterpret_cast<uint32_t*>(base + w.keys_out);
    auto* positions_in = reinterpret_cast<int32_t*>(base + w.positions_in);
    auto* positions_out = reinterpret_cast<int32_t*>(base + w.positions_out);
    auto* flag = reinterpret_cast<unsigned long long*>(bad_position);

    check(cudaMemsetAsync(first, 0, (V + 1) * sizeof(int32_t), s), "clearing the token counts");
    FATHOM_LAUNCH(launch::grid_stride_blocks(N, kThreads), kThreads, 0, s, embedding_count_kernel<I>)
    (static_cast<const I*>(indices), N, V, first, keys_in, positions_in, flag);
    FATHOM_CUDA_CHECK_LAUNCH("embedding_count_kernel");
    FATHOM_LAUNCH(1, kScanThreads, 0, s, exclusive_scan_kernel)(first, V + 1);
    FATHOM_CUDA_CHECK_LAUNCH("exclusive_scan_kernel");
    size_t bytes = temp_bytes;
    check(cub::DeviceRadixSort::SortPairs(base + w.sort_temp, bytes, keys_in, keys_out, positions_in, positions_out,
                                          static_cast<int>(N), 0, launch::embedding_sort_bits(V), s),
          "the stable sort of positions by token");
    FATHOM_CUDA_CHECK_LAUNCH("cub::DeviceRadixSort::SortPairs");

    const bool aligned = rows::aligned16(dweight) && rows::aligned16(dout);
    with_width<T>(C, aligned, [&](auto width) {
      constexpr int W = decltype(width)::value;
      const launch::EmbeddingSumGeometry g = launch::embedding_sum_geometry(V, C / W);
      if (g.tasks == 0) return;
      FATHOM_LAUNCH(g.blocks, g.threads, 0, s, embedding_sum_kernel<T, W>)
      (static_cast<T*>(dweight), static_cast<const T*>(dout), first, positions_out, V, C, g.tiles, accumulate, flag);
      FATHOM_CUDA_CHECK_LAUNCH("embedding_sum_kernel");
    });
  });
}

}  // namespace fathom::kernels
