// CPU causal scaled-dot-product attention, flash-attention style, on contiguous
// (B, NH, T, HS) q, k, v.
// Layout: work is cut into (batch*head, 64-row block) tasks; no T x T matrix is ever held, only
// one 64 x 64 score tile per thread next to 64 x HS tiles of q, k^T, v (about 100 KiB at
// HS = 64: L2-resident, the inner rows L1-resident). Every inner loop is an axpy over a
// contiguous row (scores use a transposed k tile), so it vectorises with no reassociation.
// Forward: per query block, an online softmax over key blocks up to the diagonal keeps the
// running max m, sum l and the unnormalised output; it saves lse = m + log(l) per row.
// Backward, without atomics, in two passes that recompute P = exp(scale * q k^T - lse):
//   pass 1 (tasks = key blocks): dv = P^T dout, dk = scale * dS^T q over all query blocks;
//   pass 2 (tasks = query blocks): dq = scale * dS k over the key blocks up to the diagonal;
// with dS = P * (dout v^T - D), D = rowsum(dout * out) - dlse. Each output tile is owned by
// one task and summed in a fixed order, so results are bit-identical for any thread count.
// Precision: 16-bit tensors are converted to f32 tile by tile; f64 computes in f64.
#include <cmath>
#include <limits>

#include "kernels/cpu/nn_cpu_common.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {
using namespace nn_cpu;

constexpr int64_t kBlockQ = 64;  // query rows per tile
constexpr int64_t kBlockK = 64;  // key rows per tile (also the score tile's row stride)

struct Dims {
  int64_t BH, T, HS;
  double scale;
  int64_t head_elems() const { return T * HS; }
  int64_t blocks(int64_t block) const { return (T + block - 1) / block; }
};

// Tiles of one thread, allocated once per parallel region.
template <typename A>
struct Tiles {
  std::vector<A> q, dout, k, kt, vt, v, s, dp, acc, dk, dv, m, l;
  explicit Tiles(int64_t HS)
      : q(kBlockQ * HS),
        dout(kBlockQ * HS),
        k(kBlockK * HS),
        kt(HS * kBlockK),
        vt(HS * kBlockK),
        v(kBlockK * HS),
        s(kBlockQ * kBlockK),
        dp(kBlockQ * kBlockK),
        acc(kBlockQ * HS),
        dk(kBlockK * HS),
        dv(kBlockK * HS),
        m(kBlockQ),
        l(kBlockQ) {}
};

template <typename T, typename A>
void load_tile(A* dst, const T* src, int64_t rows, int64_t HS) {
  for (int64_t i = 0; i < rows * HS; ++i) dst[i] = static_cast<A>(src[i]);
}

// dst (HS x kBlockK) = src (rows x HS) transposed.
template <typename T, typename A>
void load_transposed(A* dst, const T* src, int64_t rows, int64_t HS) {
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t d = 0; d < HS; ++d) dst[d * kBlockK + j] = static_cast<A>(src[j * HS + d]);
}

// out (nq x kBlockK) = a (nq x HS) * bt (HS x nk) * scale, each row summed over d in order.
template <typename A>
void tile_product(A* out, const A* a, const A* bt, int64_t nq, int64_t nk, int64_t HS, A scale) {
  for (int64_t i = 0; i < nq; ++i) {
    A* row = out + i * kBlockK;
    for (int64_t j = 0; j < nk; ++j) row[j] = A(0);
    for (int64_t d = 0; d < HS; ++d) {
      const A ad = a[i * HS + d];
      const A* b = bt + d * kBlockK;
      for (int64_t j = 0; j < nk; ++j) row[j] += ad * b[j];
    }
    if (scale != A(1))
      for (int64_t j = 0; j < nk; ++j) row[j] *= scale;
  }
}

// Keys a query row may see in a key tile: those at or before the query's own position.
inline int64_t visible_keys(int64_t query, int64_t k0, int64_t nk) {
  return std::clamp<int64_t>(query - k0 + 1, 0, nk);
}

template <typename T>
void attention_forward(T* out, Acc<T>* lse, const T* q, const T* k, const T* v, const Dims& dims) {
  using A = Acc<T>;
  const int64_t HS = dims.HS, T_ = dims.T, q_blocks = dims.blocks(kBlockQ);
  const int64_t tasks = dims.BH * q_blocks;
  const int threads = threads_for(dims.BH * T_ * T_ * HS * 2, tasks);
  const A scale = static_cast<A>(dims.scale);
#pragma omp parallel num_threads(threads)
  {
    Tiles<A> tile(HS);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / q_blocks, q0 = (task % q_blocks) * kBlockQ;
      const int64_t nq = std::min(kBlockQ, T_ - q0), key_end = q0 + nq;
      const int64_t head = bh * dims.head_elems();
      load_tile(tile.q.data(), q + head + q0 * HS, nq, HS);
      std::fill(tile.m.begin(), tile.m.end(), -std::numeric_limits<A>::infinity());
      std::fill(tile.l.begin(), tile.l.end(), A(0));
      std::fill(tile.acc.begin(), tile.acc.end(), A(0));
      for (int64_t k0 = 0; k0 < key_end; k0 += kBlockK) {
        const int64_t nk = std::min(kBlockK, key_end - k0);
        load_transposed(tile.kt.data(), k + head + k0 * HS, nk, HS);
        load_tile(tile.v.data(), v + head + k0 * HS, nk, HS);
        tile_product(tile.s.data(), tile.q.data(), tile.kt.data(), nq, nk, HS, scale);
        for (int64_t i = 0; i < nq; ++i) {
          const int64_t visible = visible_keys(q0 + i, k0, nk);
          if (visible == 0) continue;
          A* p = tile.s.data() + i * kBlockK;
          A* acc = tile.acc.data() + i * HS;
          const A m_new = std::max(tile.m[i], row_max(p, visible));
          const A correction = std::exp(tile.m[i] - m_new);  // 0 on the first tile (m = -inf)
          for (int64_t j = 0; j < visible; ++j) p[j] = exp_acc(p[j] - m_new);
          tile.l[i] = tile.l[i] * correction + row_sum(p, visible);
          if (correction != A(1))
            for (int64_t d = 0; d < HS; ++d) acc[d] *= correction;
          for (int64_t j = 0; j < visible; ++j) {
            const A pj = p[j];
            const A* vj = tile.v.data() + j * HS;
            for (int64_t d = 0; d < HS; ++d) acc[d] += pj * vj[d];
          }
          tile.m[i] = m_new;
        }
      }
      for (int64_t i = 0; i < nq; ++i) {
        A* acc = tile.acc.data() + i * HS;
        const A inv = A(1) / tile.l[i];
        for (int64_t d = 0; d < HS; ++d) acc[d] *= inv;
        store_row(out + head + (q0 + i) * HS, acc, HS, /*accumulate=*/false);
        lse[bh * T_ + q0 + i] = tile.m[i] + std::log(tile.l[i]);
      }
    }
  }
}

// For a (query tile, key tile) pair already in `tile` (q, dout, kt, vt): leaves P in tile.s
// and dS = P * (dP - D) in tile.dp, zero beyond the causal limit.
template <typename A>
void probabilities_and_dscores(Tiles<A>& tile, const A* lse, const A* D, int64_t q0, int64_t nq, int64_t k0, int64_t nk,
                               int64_t HS, A scale) {
  tile_product(tile.s.data(), tile.q.data(), tile.kt.data(), nq, nk, HS, scale);
  tile_product(tile.dp.data(), tile.dout.data(), tile.vt.data(), nq, nk, HS, A(1));
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t visible = visible_keys(q0 + i, k0, nk);
    A* p = tile.s.data() + i * kBlockK;
    A* ds = tile.dp.data() + i * kBlockK;
    const A row_lse = lse[q0 + i], row_d = D[q0 + i];
    for (int64_t j = 0; j < visible; ++j) {
      p[j] = exp_acc(p[j] - row_lse);
      ds[j] = p[j] * (ds[j] - row_d);
    }
    for (int64_t j = visible; j < nk; ++j) p[j] = ds[j] = A(0);
  }
}

template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const Acc<T>* lse, const Acc<T>* dlse, const Dims& dims, bool accumulate) {
  using A = Acc<T>;
  const int64_t HS = dims.HS, T_ = dims.T, rows = dims.BH * T_;
  const A scale = static_cast<A>(dims.scale);
  // D = rowsum(dout * out) - dlse: the softmax backward's row term (dlse enters through it).
  std::vector<A> D(rows);
  parallel_rows(rows, 2 * HS, [&](int64_t begin, int64_t end) {
    std::vector<A> a_scratch, b_scratch;
    for (int64_t r = begin; r < end; ++r) {
      const A* a = load_row(dout + r * HS, HS, a_scratch);
      const A* b = load_row(out + r * HS, HS, b_scratch);
      D[r] = lane_sum<A>(HS, [&](int64_t d) { return a[d] * b[d]; }) - (dlse ? dlse[r] : A(0));
    }
  });
  const int64_t work = dims.BH * T_ * T_ * HS * 2;

  if (dk || dv) {  // pass 1: one task per key tile, looping over the query tiles that see it
    const int64_t k_blocks = dims.blocks(kBlockK), tasks = dims.BH * k_blocks;
#pragma omp parallel num_threads(threads_for(work, tasks))
    {
      Tiles<A> tile(HS);
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t bh = task / k_blocks, k0 = (task % k_blocks) * kBlockK;
        const int64_t nk = std::min(kBlockK, T_ - k0), head = bh * dims.head_elems();
        load_transposed(tile.kt.data(), k + head + k0 * HS, nk, HS);
        load_transposed(tile.vt.data(), v + head + k0 * HS, nk, HS);
        std::fill(tile.dk.begin(), tile.dk.end(), A(0));
        std::fill(tile.dv.begin(), tile.dv.end(), A(0));
        for (int64_t q0 = (k0 / kBlockQ) * kBlockQ; q0 < T_; q0 += kBlockQ) {
          const int64_t nq = std::min(kBlockQ, T_ - q0);
          load_tile(tile.q.data(), q + head + q0 * HS, nq, HS);
          load_tile(tile.dout.data(), dout + head + q0 * HS, nq, HS);
          probabilities_and_dscores(tile, lse + bh * T_, D.data() + bh * T_, q0, nq, k0, nk, HS, scale);
          for (int64_t i = 0; i < nq; ++i) {
            const int64_t visible = visible_keys(q0 + i, k0, nk);
            const A* p = tile.s.data() + i * kBlockK;
            const A* ds = tile.dp.data() + i * kBlockK;
            const A* qi = tile.q.data() + i * HS;
            const A* gi = tile.dout.data() + i * HS;
            for (int64_t j = 0; j < visible; ++j) {
              A* dvj = tile.dv.data() + j * HS;
              A* dkj = tile.dk.data() + j * HS;
              const A pj = p[j], dsj = ds[j];
              for (int64_t d = 0; d < HS; ++d) dvj[d] += pj * gi[d];
              for (int64_t d = 0; d < HS; ++d) dkj[d] += dsj * qi[d];
            }
          }
        }
        for (int64_t j = 0; j < nk; ++j) {
          A* dkj = tile.dk.data() + j * HS;
          for (int64_t d = 0; d < HS; ++d) dkj[d] *= scale;
          if (dk) store_row(dk + head + (k0 + j) * HS, dkj, HS, accumulate);
          if (dv) store_row(dv + head + (k0 + j) * HS, tile.dv.data() + j * HS, HS, accumulate);
        }
      }
    }
  }

  if (dq) {  // pass 2: one task per query tile, looping over the key tiles up to the diagonal
    const int64_t q_blocks = dims.blocks(kBlockQ), tasks = dims.BH * q_blocks;
#pragma omp parallel num_threads(threads_for(work, tasks))
    {
      Tiles<A> tile(HS);
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t bh = task / q_blocks, q0 = (task % q_blocks) * kBlockQ;
        const int64_t nq = std::min(kBlockQ, T_ - q0), key_end = q0 + nq, head = bh * dims.head_elems();
        load_tile(tile.q.data(), q + head + q0 * HS, nq, HS);
        load_tile(tile.dout.data(), dout + head + q0 * HS, nq, HS);
        std::fill(tile.acc.begin(), tile.acc.end(), A(0));
        for (int64_t k0 = 0; k0 < key_end; k0 += kBlockK) {
          const int64_t nk = std::min(kBlockK, key_end - k0);
          load_transposed(tile.kt.data(), k + head + k0 * HS, nk, HS);
          load_transposed(tile.vt.data(), v + head + k0 * HS, nk, HS);
          load_tile(tile.k.data(), k + head + k0 * HS, nk, HS);
          probabilities_and_dscores(tile, lse + bh * T_, D.data() + bh * T_, q0, nq, k0, nk, HS, scale);
          for (int64_t i = 0; i < nq; ++i) {
            const int64_t visible = visible_keys(q0 + i, k0, nk);
            const A* ds = tile.dp.data() + i * kBlockK;
            A* dqi = tile.acc.data() + i * HS;
            for (int64_t j = 0; j < visible; ++j) {
              const A dsj = ds[j];
              const A* kj = tile.k.data() + j * HS;
              for (int64_t d = 0; d < HS; ++d) dqi[d] += dsj * kj[d];
            }
          }
        }
        for (int64_t i = 0; i < nq; ++i) {
          A* dqi = tile.acc.data() + i * HS;
          for (int64_t d = 0; d < HS; ++d) dqi[d] *= scale;
          store_row(dq + head + (q0 + i) * HS, dqi, HS, accumulate);
        }
      }
    }
  }
}

}  // namespace

void attention_forward_cpu(DType dtype, void* out, void* lse, const void* q, const void* k, const void* v, int64_t B,
                           int64_t NH, int64_t T, int64_t HS, double scale) {
  const Dims dims{B * NH, T, HS, scale};
  FATHOM_DISPATCH_FLOATING(dtype, "causal_attention", [&]<typename T_>() {
    attention_forward(static_cast<T_*>(out), static_cast<Acc<T_>*>(lse), static_cast<const T_*>(q),
                      static_cast<const T_*>(k), static_cast<const T_*>(v), dims);
  });
}

void attention_backward_cpu(DType dtype, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                            const void* v, const void* out, const void* lse, const void* dlse, int64_t B, int64_t NH,
                            int64_t T, int64_t HS, double scale, bool accumulate) {
  const Dims dims{B * NH, T, HS, scale};
  FATHOM_DISPATCH_FLOATING(dtype, "causal_attention_backward", [&]<typename T_>() {
    using A = Acc<T_>;
    attention_backward(static_cast<T_*>(dq), static_cast<T_*>(dk), static_cast<T_*>(dv), static_cast<const T_*>(dout),
                       static_cast<const T_*>(q), static_cast<const T_*>(k), static_cast<const T_*>(v),
                       static_cast<const T_*>(out), static_cast<const A*>(lse), static_cast<const A*>(dlse), dims,
                       accumulate);
  });
}

}  // namespace fathom::kernels
