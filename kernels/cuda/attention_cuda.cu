// CUDA twin of kernels/cpu/attention_cpu.cpp: causal scaled-dot-product attention, flash-attention
// style, on contiguous q (B, NH, Tq, HS) and k, v (B, NKV, Tk, HS) with grouped-query heads, a
// KV cache's offset, an optional sliding window and padding-key mask (kernels/attention.h, whose
// visibility rule is `Visibility` below); lse (B, NH, Tq) is saved for the backward.
//
// Layout (kernels/launch_geometry.h, "Causal attention"): a block of 4 warps owns 16 rows of one
// (batch, head), 4 per warp, kept in shared memory; the other operand streams through shared
// memory in tiles of 32 rows, lane j taking row j of the tile. Scores are one dot product per
// lane (no cross-lane sum); the products with v, dout, q or k give each lane the head dims
// d = lane + 32c of its rows, the tile's probabilities broadcast by shuffles in key order.
//   forward (per query block): online softmax over key tiles up to the diagonal; lse = m + log l.
//   dk/dv (per kv head's key block, looping over the group's query heads and the query tiles
//     that see the block): dv = P^T dout, dk = scale dS^T q.
//   dq (per query block, looping over the key tiles it sees): dq = scale dS k.
// A query that sees no key keeps m = -inf: its output row is zero and its lse -inf.
// with P = exp(scale q k^T - lse), dS = P (dout v^T - D), D = rowsum(dout * out) - dlse from a
// first small kernel. Every output element is owned by one lane and summed in a fixed order (no
// atomics), so results are the same on every run. Plain FP32/FP64 SIMT arithmetic, no tensor cores.
//
// Precision: f16/bf16 are converted to f32 as tiles load and rounded once on store; f32 computes
// in f32, f64 in f64, with the CPU twin's formulas (its exp approximation for f32, the row sums in
// key order); partial sums are grouped differently (32-key tiles, warp trees), so f32 results
// differ from the CPU's in the last bits.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "core/half.h"
#include "kernels/elementwise_math.h"
#include "kernels/launch_geometry.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {

using launch::kAttnBlockRows;
using launch::kAttnRowsPerWarp;
using launch::kAttnThreads;
using launch::kAttnTile;

constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename A>
__device__ A negative_infinity() {
  if constexpr (std::is_same_v<A, double>) return -__longlong_as_double(0x7ff0000000000000ll);
  else return -__int_as_float(0x7f800000);
}

__device__ inline float log_acc(float x) { return logf(x); }
__device__ inline double log_acc(double x) { return ::log(x); }

// Butterfly reductions: every lane ends with the same bits (each step adds the same two values,
// only in swapped order), in an order fixed by the code.
template <typename A>
__device__ A warp_sum(A v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}
template <typename A>
__device__ A warp_max(A v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const A other = __shfl_xor_sync(kFullMask, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

// dst[r][d] (rows `stride` apart) = src row row0 + r, converted; zero past T or HS, so padded
// rows and dims add nothing.
template <typename T, typename A>
__device__ void load_rows(A* dst, int stride, int tier, const T* src, int64_t row0, int rows, int64_t T_, int HS) {
  for (int idx = threadIdx.x; idx < rows * tier; idx += blockDim.x) {
    const int r = idx / tier, d = idx % tier;
    const int64_t row = row0 + r;
    dst[r * stride + d] = row < T_ && d < HS ? A(src[row * HS + d]) : A(0);
  }
}

template <typename T, typename A>
__device__ void store(T* dst, A value, bool accumulate) {
  *dst = accumulate ? T(A(*dst) + value) : T(value);
}

// Which keys a query sees (kernels/attention.h): query i sits at key position i + Tk - Tq.
struct Visibility {
  AttentionShape s;
  __device__ int64_t offset() const { return s.Tk - s.Tq; }
  __device__ int64_t first_key(int64_t i) const {
    const int64_t first = i + offset() - s.window + 1;
    return s.window > 0 && first > 0 ? first : 0;
  }
  __device__ int64_t last_key(int64_t i) const { return i + offset(); }
  __device__ int64_t first_query(int64_t j) const { return j - offset() > 0 ? j - offset() : 0; }
  __device__ int64_t last_query(int64_t j) const {
    const int64_t last = j + s.window - 1 - offset();
    return s.window > 0 && last < s.Tq - 1 ? last : s.Tq - 1;
  }
  // Query i (< Tq) of batch b sees key j (any index).
  __device__ bool sees(int64_t b, int64_t i, int64_t j) const {
    return j >= first_key(i) && j <= last_key(i) && (s.keep == nullptr || s.keep[b * s.Tk + j]);
  }
  __device__ int64_t q_head(int64_t bh) const { return bh * s.Tq * s.HS; }
  __device__ int64_t kv_head(int64_t bh) const {
    const int64_t b = bh / s.NH, h = bh % s.NH;
    return (b * s.NKV + h / (s.NH / s.NKV)) * s.Tk * s.HS;
  }
};

template <typename T, int TIER>
__global__ void __launch_bounds__(kAttnThreads)
    attention_forward_kernel(T* out, Acc<T>* lse, const T* q, const T* k, const T* v, AttentionShape shape) {
  using A = Acc<T>;
  const Visibility vis{shape};
  const int64_t BH = shape.B * shape.NH, T_ = shape.Tq, Tk = shape.Tk;
  const int HS = static_cast<int>(shape.HS);
  const A scale = static_cast<A>(shape.scale);
  constexpr int R = kAttnRowsPerWarp, DPL = TIER / 32, KP = TIER + 1;
  FATHOM_DYNAMIC_SHARED(unsigned char, smem, 16);
  A* qs = reinterpret_cast<A*>(smem);  // [kAttnBlockRows][TIER]
  A* ks = qs + kAttnBlockRows * TIER;  // [kAttnTile][KP]
  A* vs = ks + kAttnTile * KP;         // [kAttnTile][TIER]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t blocks = launch::attention_row_blocks(T_), tasks = BH * blocks;

  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const launch::AttentionTask t = launch::attention_task(task, BH, blocks, /*heaviest_last=*/true);
    const int64_t head = vis.q_head(t.bh), kv_head = vis.kv_head(t.bh), b = t.bh / shape.NH;
    const int64_t q0 = t.block * kAttnBlockRows, row0 = q0 + warp * R;
    const int64_t last_row = T_ - 1 < q0 + kAttnBlockRows - 1 ? T_ - 1 : q0 + kAttnBlockRows - 1;
    const int64_t warp_last = T_ - 1 < row0 + R - 1 ? T_ - 1 : row0 + R - 1;
    __syncthreads();  // the previous task is done with the tiles
    load_rows(qs, TIER, TIER, q + head, q0, kAttnBlockRows, T_, HS);
    const A* my_q = qs + warp * R * TIER;

    A m[R], l[R], acc[R][DPL];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      m[r] = negative_infinity<A>();
      l[r] = A(0);
#pragma unroll
      for (int c = 0; c < DPL; ++c) acc[r][c] = A(0);
    }
    const int64_t key_end = vis.last_key(last_row) + 1;
    for (int64_t k0 = vis.first_key(q0); k0 < key_end; k0 += kAttnTile) {
      __syncthreads();  // the previous k, v tiles are consumed (and the q rows are in)
      load_rows(ks, KP, TIER, k + kv_head, k0, kAttnTile, Tk, HS);
      load_rows(vs, TIER, TIER, v + kv_head, k0, kAttnTile, Tk, HS);
      __syncthreads();
      // Every key of the tile is after this warp's rows, or before their windows.
      if (row0 >= T_ || k0 > vis.last_key(warp_last) || k0 + kAttnTile - 1 < vis.first_key(row0)) continue;

      A s[R];
#pragma unroll
      for (int r = 0; r < R; ++r) s[r] = A(0);
      const A* my_k = ks + lane * KP;
#pragma unroll 4
      for (int d = 0; d < HS; ++d) {
        const A kd = my_k[d];
#pragma unroll
        for (int r = 0; r < R; ++r) s[r] += my_q[r * TIER + d] * kd;
      }
      const int64_t j = k0 + lane;
      A p[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        // Rows past Tq mirror the last row (never stored).
        const int64_t i = row0 + r < T_ ? row0 + r : T_ - 1;
        const bool visible = vis.sees(b, i, j);
        const A score = visible ? s[r] * scale : negative_infinity<A>();
        const A tile_max = warp_max(score);
        const A m_new = m[r] > tile_max ? m[r] : tile_max;  // -inf while the row has seen no key
        p[r] = visible ? math::exp(score - m_new) : A(0);
        // 0 on the row's first keys (m = -inf); 1 while there are none (nothing to rescale).
        const A correction = m_new == negative_infinity<A>() ? A(1) : math::exp(m[r] - m_new);
        l[r] = l[r] * correction + warp_sum(p[r]);
#pragma unroll
        for (int c = 0; c < DPL; ++c) acc[r][c] *= correction;
        m[r] = m_new;
      }
      const int64_t tile_keys = Tk - k0 < kAttnTile ? Tk - k0 : kAttnTile;
      for (int jj = 0; jj < tile_keys; ++jj) {
        A vv[DPL];
#pragma unroll
        for (int c = 0; c < DPL; ++c) vv[c] = vs[jj * TIER + lane + 32 * c];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const A pj = __shfl_sync(kFullMask, p[r], jj);
#pragma unroll
          for (int c = 0; c < DPL; ++c) acc[r][c] += pj * vv[c];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t i = row0 + r;
      if (i >= T_) break;
      const bool saw_keys = l[r] > A(0);
      const A inv = saw_keys ? A(1) / l[r] : A(0);
#pragma unroll
      for (int c = 0; c < DPL; ++c) {
        const int d = lane + 32 * c;
        if (d < HS) out[head + i * HS + d] = T(acc[r][c] * inv);
      }
      if (lane == 0) lse[t.bh * T_ + i] = saw_keys ? m[r] + log_acc(l[r]) : negative_infinity<A>();
    }
  }
}

// D[row] = sum(dout * out) - dlse[row]: one warp per row.
template <typename T>
__global__ void attention_row_term_kernel(Acc<T>* D, const T* dout, const T* out, const Acc<T>* dlse, int64_t rows,
                                          int HS) {
  using A = Acc<T>;
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    A sum = A(0);
    for (int d = lane; d < HS; d += 32) sum += A(dout[row * HS + d]) * A(out[row * HS + d]);
    sum = warp_sum(sum);
    if (lane == 0) D[row] = sum - (dlse ? dlse[row] : A(0));
  }
}

template <typename T, int TIER>
__global__ void __launch_bounds__(kAttnThreads)
    attention_dq_kernel(T* dq, const T* dout, const T* q, const T* k, const T* v, const Acc<T>* lse, const Acc<T>* D,
                        AttentionShape shape, bool accumulate) {
  using A = Acc<T>;
  const Visibility vis{shape};
  const int64_t BH = shape.B * shape.NH, T_ = shape.Tq, Tk = shape.Tk;
  const int HS = static_cast<int>(shape.HS);
  const A scale = static_cast<A>(shape.scale);
  constexpr int R = kAttnRowsPerWarp, DPL = TIER / 32, KP = TIER + 1;
  FATHOM_DYNAMIC_SHARED(unsigned char, smem, 16);
  A* qs = reinterpret_cast<A*>(smem);  // [kAttnBlockRows][TIER]
  A* gs = qs + kAttnBlockRows * TIER;  // dout rows, [kAttnBlockRows][TIER]
  A* ks = gs + kAttnBlockRows * TIER;  // [kAttnTile][KP]
  A* vs = ks + kAttnTile * KP;         // [kAttnTile][KP]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t blocks = launch::attention_row_blocks(T_), tasks = BH * blocks;

  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const launch::AttentionTask t = launch::attention_task(task, BH, blocks, /*heaviest_last=*/true);
    const int64_t head = vis.q_head(t.bh), kv_head = vis.kv_head(t.bh), b = t.bh / shape.NH;
    const int64_t q0 = t.block * kAttnBlockRows, row0 = q0 + warp * R;
    const int64_t last_row = T_ - 1 < q0 + kAttnBlockRows - 1 ? T_ - 1 : q0 + kAttnBlockRows - 1;
    const int64_t warp_last = T_ - 1 < row0 + R - 1 ? T_ - 1 : row0 + R - 1;
    __syncthreads();
    load_rows(qs, TIER, TIER, q + head, q0, kAttnBlockRows, T_, HS);
    load_rows(gs, TIER, TIER, dout + head, q0, kAttnBlockRows, T_, HS);
    const A* my_q = qs + warp * R * TIER;
    const A* my_g = gs + warp * R * TIER;

    A row_lse[R], row_d[R], acc[R][DPL];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t i = row0 + r < T_ ? row0 + r : T_ - 1;
      row_lse[r] = lse[t.bh * T_ + i];
      row_d[r] = D[t.bh * T_ + i];
#pragma unroll
      for (int c = 0; c < DPL; ++c) acc[r][c] = A(0);
    }
    const int64_t key_end = vis.last_key(last_row) + 1;
    for (int64_t k0 = vis.first_key(q0); k0 < key_end; k0 += kAttnTile) {
      __syncthreads();
      load_rows(ks, KP, TIER, k + kv_head, k0, kAttnTile, Tk, HS);
      load_rows(vs, KP, TIER, v + kv_head, k0, kAttnTile, Tk, HS);
      __syncthreads();
      if (row0 >= T_ || k0 > vis.last_key(warp_last) || k0 + kAttnTile - 1 < vis.first_key(row0)) continue;

      A s[R], dp[R];
#pragma unroll
      for (int r = 0; r < R; ++r) s[r] = dp[r] = A(0);
      const A* my_k = ks + lane * KP;
      const A* my_v = vs + lane * KP;
#pragma unroll 4
      for (int d = 0; d < HS; ++d) {
        const A kd = my_k[d], vd = my_v[d];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          s[r] += my_q[r * TIER + d] * kd;
          dp[r] += my_g[r * TIER + d] * vd;
        }
      }
      const int64_t j = k0 + lane;
      A ds[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int64_t i = row0 + r < T_ ? row0 + r : T_ - 1;
        const bool visible = vis.sees(b, i, j);
        const A p = visible ? math::exp(s[r] * scale - row_lse[r]) : A(0);
        ds[r] = visible ? p * (dp[r] - row_d[r]) : A(0);
      }
      const int64_t tile_keys = Tk - k0 < kAttnTile ? Tk - k0 : kAttnTile;
      for (int jj = 0; jj < tile_keys; ++jj) {
        A kk[DPL];
#pragma unroll
        for (int c = 0; c < DPL; ++c) kk[c] = ks[jj * KP + lane + 32 * c];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const A dsj = __shfl_sync(kFullMask, ds[r], jj);
#pragma unroll
          for (int c = 0; c < DPL; ++c) acc[r][c] += dsj * kk[c];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t i = row0 + r;
      if (i >= T_) break;
#pragma unroll
      for (int c = 0; c < DPL; ++c) {
        const int d = lane + 32 * c;
        if (d < HS) store(dq + head + i * HS + d, acc[r][c] * scale, accumulate);
      }
    }
  }
}

template <typename T, int TIER>
__global__ void __launch_bounds__(kAttnThreads)
    attention_dkdv_kernel(T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const Acc<T>* lse,
                          const Acc<T>* D, AttentionShape shape, bool accumulate) {
  using A = Acc<T>;
  const Visibility vis{shape};
  const int64_t B_KV = shape.B * shape.NKV, T_ = shape.Tq, Tk = shape.Tk, group = shape.NH / shape.NKV;
  const int HS = static_cast<int>(shape.HS);
  const A scale = static_cast<A>(shape.scale);
  constexpr int R = kAttnRowsPerWarp, DPL = TIER / 32, KP = TIER + 1;
  FATHOM_DYNAMIC_SHARED(unsigned char, smem, 16);
  A* ks = reinterpret_cast<A*>(smem);  // own keys, [kAttnBlockRows][TIER]
  A* vs = ks + kAttnBlockRows * TIER;  // own values, [kAttnBlockRows][TIER]
  A* qs = vs + kAttnBlockRows * TIER;  // [kAttnTile][KP]
  A* gs = qs + kAttnTile * KP;         // dout tile, [kAttnTile][KP]
  A* ls = gs + kAttnTile * KP;         // the tile's lse, [kAttnTile]
  A* Ds = ls + kAttnTile;              // the tile's D, [kAttnTile]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t blocks = launch::attention_row_blocks(Tk), tasks = B_KV * blocks;

  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    // t.bh is a (batch, kv head); the task sums over the kv head's `group` query heads.
    const launch::AttentionTask t = launch::attention_task(task, B_KV, blocks, /*heaviest_last=*/false);
    const int64_t kv_head = t.bh * Tk * HS, b = t.bh / shape.NKV, first_head = t.bh % shape.NKV * group;
    const int64_t k0 = t.block * kAttnBlockRows, key0 = k0 + warp * R;
    const int64_t last_key = Tk - 1 < k0 + kAttnBlockRows - 1 ? Tk - 1 : k0 + kAttnBlockRows - 1;
    __syncthreads();
    load_rows(ks, TIER, TIER, k + kv_head, k0, kAttnBlockRows, Tk, HS);
    load_rows(vs, TIER, TIER, v + kv_head, k0, kAttnBlockRows, Tk, HS);
    const A* my_k = ks + warp * R * TIER;
    const A* my_v = vs + warp * R * TIER;

    A dk_acc[R][DPL], dv_acc[R][DPL];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < DPL; ++c) dk_acc[r][c] = dv_acc[r][c] = A(0);
    const int64_t query_end = vis.last_query(last_key) + 1;
    for (int64_t step = 0; step < group * launch::ceil_div(T_, kAttnTile); ++step) {
      // Query heads of the group in order, each over its query tiles from the first that sees k0.
      const int64_t bh = (b * shape.NH + first_head + step % group), q_tile = step / group;
      const int64_t q0 = launch::attention_first_query_tile_start(vis.first_query(k0)) + q_tile * kAttnTile;
      if (q0 >= query_end) break;
      const int64_t head = vis.q_head(bh);
      __syncthreads();
      load_rows(qs, KP, TIER, q + head, q0, kAttnTile, T_, HS);
      load_rows(gs, KP, TIER, dout + head, q0, kAttnTile, T_, HS);
      if (threadIdx.x < kAttnTile) {
        const int64_t i = q0 + threadIdx.x;
        ls[threadIdx.x] = i < T_ ? lse[bh * T_ + i] : A(0);
        Ds[threadIdx.x] = i < T_ ? D[bh * T_ + i] : A(0);
      }
      __syncthreads();
      // Every query of the tile is before this warp's keys, or past their windows.
      if (key0 >= Tk || vis.last_key(q0 + kAttnTile - 1) < key0 || vis.first_key(q0) > key0 + R - 1) continue;

      A s[R], dp[R];
#pragma unroll
      for (int r = 0; r < R; ++r) s[r] = dp[r] = A(0);
      const A* my_q = qs + lane * KP;
      const A* my_g = gs + lane * KP;
#pragma unroll 4
      for (int d = 0; d < HS; ++d) {
        const A qd = my_q[d], gd = my_g[d];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          s[r] += qd * my_k[r * TIER + d];
          dp[r] += gd * my_v[r * TIER + d];
        }
      }
      const int64_t i = q0 + lane;
      A p[R], ds[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const bool visible = i < T_ && vis.sees(b, i, key0 + r);
        p[r] = visible ? math::exp(s[r] * scale - ls[lane]) : A(0);
        ds[r] = visible ? p[r] * (dp[r] - Ds[lane]) : A(0);
      }
      const int64_t tile_queries = T_ - q0 < kAttnTile ? T_ - q0 : kAttnTile;
      for (int ii = 0; ii < tile_queries; ++ii) {
        A g[DPL], qq[DPL];
#pragma unroll
        for (int c = 0; c < DPL; ++c) {
          g[c] = gs[ii * KP + lane + 32 * c];
          qq[c] = qs[ii * KP + lane + 32 * c];
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const A pj = __shfl_sync(kFullMask, p[r], ii);
          const A dsj = __shfl_sync(kFullMask, ds[r], ii);
#pragma unroll
          for (int c = 0; c < DPL; ++c) {
            dv_acc[r][c] += pj * g[c];
            dk_acc[r][c] += dsj * qq[c];
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t j = key0 + r;
      if (j >= Tk) break;
#pragma unroll
      for (int c = 0; c < DPL; ++c) {
        const int d = lane + 32 * c;
        if (d >= HS) continue;
        if (dk) store(dk + kv_head + j * HS + d, dk_acc[r][c] * scale, accumulate);
        if (dv) store(dv + kv_head + j * HS + d, dv_acc[r][c], accumulate);
      }
    }
  }
}

// Kernels needing more than 48 KiB of dynamic shared memory must say so before launch.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, int64_t bytes, const char* name) {
  const cudaError_t status =
      cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
  if (status != cudaSuccess) {
    cudaGetLastError();
    const std::string message = std::string(name) + ": cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " +
                                std::to_string(bytes) + ") failed: " + cudaGetErrorString(status);
    cuda::fail(message.c_str(), __FILE__, __LINE__);
  }
}

template <typename Fn>
void dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn(float{});
    case DType::F64: return fn(double{});
    case DType::F16: return fn(Half{});
    case DType::BF16: return fn(BFloat16{});
    default: cuda::fail("causal_attention on CUDA: unsupported dtype", __FILE__, __LINE__);
  }
}

template <typename Fn>
void dispatch_tier(int64_t HS, Fn&& fn) {
  switch (launch::attention_head_tier(HS)) {
    case 32: return fn(std::integral_constant<int, 32>{});
    case 64: return fn(std::integral_constant<int, 64>{});
    case 128: return fn(std::integral_constant<int, 128>{});
    default: cuda::fail("causal_attention on CUDA: head sizes above 128 are not supported", __FILE__, __LINE__);
  }
}

}  // namespace

void attention_forward_cuda(DType dtype, void* out, void* lse, const void* q, const void* k, const void* v,
                            const AttentionShape& shape, void* stream) {
  const int64_t BH = shape.B * shape.NH;
  if (BH == 0 || shape.Tq == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using S = decltype(tag);
    using A = Acc<S>;
    dispatch_tier(shape.HS, [&](auto tier) {
      constexpr int kTier = decltype(tier)::value;
      const auto kernel = attention_forward_kernel<S, kTier>;
      const int64_t smem = launch::attention_forward_smem(kTier, sizeof(A));
      allow_shared_memory(kernel, smem, "attention_forward_kernel");
      const int grid = launch::grid_stride_blocks(BH * launch::attention_row_blocks(shape.Tq), 1);
      FATHOM_LAUNCH(grid, kAttnThreads, smem, static_cast<cudaStream_t>(stream), kernel)
      (static_cast<S*>(out), static_cast<A*>(lse), static_cast<const S*>(q), static_cast<const S*>(k),
       static_cast<const S*>(v), shape);
      FATHOM_CUDA_CHECK_LAUNCH("attention_forward_kernel");
    });
  });
}

void attention_backward_cuda(DType dtype, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                             const void* v, const void* out, const void* lse, const void* dlse,
                             const AttentionShape& shape, bool accumulate, void* workspace, void* stream) {
  const int64_t BH = shape.B * shape.NH;
  if (BH == 0 || shape.Tq == 0 || (!dq && !dk && !dv)) return;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  dispatch_dtype(dtype, [&](auto tag) {
    using S = decltype(tag);
    using A = Acc<S>;
    A* D = static_cast<A*>(workspace);
    const int64_t rows = BH * shape.Tq;
    constexpr int kRowThreads = 256;
    FATHOM_LAUNCH(launch::grid_stride_blocks(rows, kRowThreads / 32), kRowThreads, 0, s, attention_row_term_kernel<S>)
    (D, static_cast<const S*>(dout), static_cast<const S*>(out), static_cast<const A*>(dlse), rows,
     static_cast<int>(shape.HS));
    FATHOM_CUDA_CHECK_LAUNCH("attention_row_term_kernel");

    dispatch_tier(shape.HS, [&](auto tier) {
      constexpr int kTier = decltype(tier)::value;
      if (dk || dv) {
        const auto kernel = attention_dkdv_kernel<S, kTier>;
        const int64_t smem = launch::attention_dkdv_smem(kTier, sizeof(A));
        allow_shared_memory(kernel, smem, "attention_dkdv_kernel");
        const int grid = launch::grid_stride_blocks(shape.B * shape.NKV * launch::attention_row_blocks(shape.Tk), 1);
        FATHOM_LAUNCH(grid, kAttnThreads, smem, s, kernel)
        (static_cast<S*>(dk), static_cast<S*>(dv), static_cast<const S*>(dout), static_cast<const S*>(q),
         static_cast<const S*>(k), static_cast<const S*>(v), static_cast<const A*>(lse), D, shape, accumulate);
        FATHOM_CUDA_CHECK_LAUNCH("attention_dkdv_kernel");
      }
      if (dq) {
        const auto kernel = attention_dq_kernel<S, kTier>;
        const int64_t smem = launch::attention_dq_smem(kTier, sizeof(A));
        allow_shared_memory(kernel, smem, "attention_dq_kernel");
        const int grid = launch::grid_stride_blocks(BH * launch::attention_row_blocks(shape.Tq), 1);
        FATHOM_LAUNCH(grid, kAttnThreads, smem, s, kernel)
        (static_cast<S*>(dq), static_cast<const S*>(dout), static_cast<const S*>(q), static_cast<const S*>(k),
         static_cast<const S*>(v), static_cast<const A*>(lse), D, shape, accumulate);
        FATHOM_CUDA_CHECK_LAUNCH("attention_dq_kernel");
      }
    });
  });
}

}  // namespace fathom::kernels
