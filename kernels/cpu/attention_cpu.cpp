// CPU causal scaled-dot-product attention, flash-attention style: q (B, NH, Tq, HS) against
// k, v (B, NKV, Tk, HS), contiguous. Grouped-query heads read their kv head in place (head h
// uses kv head h / (NH / NKV); nothing is copied); query i sits at key position i + Tk - Tq (a
// KV cache's queries come last); an optional sliding window and padding-key mask narrow what
// a query sees (kernels/attention.h).
// Layout: work is cut into (batch, head, 64-row block) tasks; no Tq x Tk matrix is ever held,
// only one 64 x 64 score tile per thread next to 64 x HS tiles of q, k^T, v (about 100 KiB at
// HS = 64: L2-resident, the inner rows L1-resident). Every inner loop is an axpy over a
// contiguous row (scores use a transposed k tile), so it vectorises with no reassociation.
// Forward: per query block, an online softmax over the key blocks the block can see keeps the
// running max m, sum l and the unnormalised output; it saves lse = m + log(l) per row (-inf,
// with a zero output row, for a query that sees no key: a padding query of a left-padded row).
// Backward, without atomics, in two passes that recompute P = exp(scale * q k^T - lse):
//   pass 1 (tasks = (batch, kv head, key block)): dv = P^T dout, dk = scale * dS^T q over every
//     query head of the group and every query block that sees the keys, in that fixed order;
//   pass 2 (tasks = query blocks): dq = scale * dS k over the key blocks the queries see;
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

// The problem (nn_kernels.h's AttentionShape) with the index arithmetic every pass shares.
struct Dims {
  const AttentionShape& s;
  int64_t group() const { return s.NH / s.NKV; }
  int64_t offset() const { return s.Tk - s.Tq; }  // query i sits at key position i + offset
  int64_t q_head(int64_t b, int64_t h) const { return (b * s.NH + h) * s.Tq * s.HS; }
  int64_t kv_head(int64_t b, int64_t h) const { return (b * s.NKV + h / group()) * s.Tk * s.HS; }
  int64_t stats_row(int64_t b, int64_t h) const { return (b * s.NH + h) * s.Tq; }
  const bool* keep(int64_t b) const { return s.keep ? s.keep + b * s.Tk : nullptr; }
  // The keys query i sees, before the padding mask: [first_key, last_key].
  int64_t last_key(int64_t i) const { return i + offset(); }
  int64_t first_key(int64_t i) const { return s.window > 0 ? std::max<int64_t>(0, i + offset() - s.window + 1) : 0; }
  // Queries that see key j: [first_query, last_query].
  int64_t first_query(int64_t j) const { return std::max<int64_t>(0, j - offset()); }
  int64_t last_query(int64_t j) const {
    return s.window > 0 ? std::min(s.Tq - 1, j + s.window - 1 - offset()) : s.Tq - 1;
  }
  int64_t work() const { return s.B * s.NH * s.Tq * std::max<int64_t>(s.window > 0 ? s.window : s.Tk, 1) * s.HS * 2; }
};

int64_t blocks_of(int64_t n, int64_t block) { return (n + block - 1) / block; }

// The columns [begin, end) of the key tile at k0 (nk keys) that query i sees, padding aside.
struct Span {
  int64_t begin, end;
  bool empty() const { return begin >= end; }
};
inline Span visible_span(const Dims& d, int64_t i, int64_t k0, int64_t nk) {
  const int64_t end = std::clamp<int64_t>(d.last_key(i) - k0 + 1, 0, nk);
  return {std::clamp<int64_t>(d.first_key(i) - k0, 0, end), end};
}

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


template <typename A>
constexpr A kNegInf = -std::numeric_limits<A>::infinity();

inline bool is_padding(const bool* keep, int64_t key) { return keep != nullptr && !keep[key]; }

template <typename T>
void attention_forward(T* out, Acc<T>* lse, const T* q, const T* k, const T* v, const Dims& d) {
  using A = Acc<T>;
  const AttentionShape& s = d.s;
  const int64_t HS = s.HS, q_blocks = blocks_of(s.Tq, kBlockQ), tasks = s.B * s.NH * q_blocks;
  const A scale = static_cast<A>(s.scale);
#pragma omp parallel num_threads(threads_for(d.work(), tasks))
  {
    Tiles<A> tile(HS);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / q_blocks, b = bh / s.NH, h = bh % s.NH, q0 = (task % q_blocks) * kBlockQ;
      const int64_t nq = std::min(kBlockQ, s.Tq - q0), q_head = d.q_head(b, h);
      const T* kh = k + d.kv_head(b, h);
      const T* vh = v + d.kv_head(b, h);
      const bool* keep = d.keep(b);
      load_tile(tile.q.data(), q + q_head + q0 * HS, nq, HS);
      std::fill(tile.m.begin(), tile.m.end(), kNegInf<A>);
      std::fill(tile.l.begin(), tile.l.end(), A(0));
      std::fill(tile.acc.begin(), tile.acc.end(), A(0));
      const int64_t key_end = d.last_key(q0 + nq - 1) + 1;
      for (int64_t k0 = d.first_key(q0); k0 < key_end; k0 += kBlockK) {
        const int64_t nk = std::min(kBlockK, key_end - k0);
        load_transposed(tile.kt.data(), kh + k0 * HS, nk, HS);
        load_tile(tile.v.data(), vh + k0 * HS, nk, HS);
        tile_product(tile.s.data(), tile.q.data(), tile.kt.data(), nq, nk, HS, scale);
        for (int64_t i = 0; i < nq; ++i) {
          const Span span = visible_span(d, q0 + i, k0, nk);
          if (span.empty()) continue;
          A* p = tile.s.data() + i * kBlockK;
          A* acc = tile.acc.data() + i * HS;
          for (int64_t j = span.begin; j < span.end; ++j)
            if (is_padding(keep, k0 + j)) p[j] = kNegInf<A>;
          const A tile_max = row_max(p + span.begin, span.end - span.begin);
          if (tile_max == kNegInf<A>) continue;  // only padding keys in this tile
          const A m_new = std::max(tile.m[i], tile_max);
          const A correction = std::exp(tile.m[i] - m_new);  // 0 on the row's first keys (m = -inf)
          for (int64_t j = span.begin; j < span.end; ++j) p[j] = exp_acc(p[j] - m_new);  // padding: exp(-inf) = 0
          tile.l[i] = tile.l[i] * correction + row_sum(p + span.begin, span.end - span.begin);
          if (correction != A(1))
            for (int64_t dd = 0; dd < HS; ++dd) acc[dd] *= correction;
          for (int64_t j = span.begin; j < span.end; ++j) {
            const A pj = p[j];
            const A* vj = tile.v.data() + j * HS;
            for (int64_t dd = 0; dd < HS; ++dd) acc[dd] += pj * vj[dd];
          }
          tile.m[i] = m_new;
        }
      }
      for (int64_t i = 0; i < nq; ++i) {
        // A query that saw no key (all padding) gets a zero row and lse = -inf.
        A* acc = tile.acc.data() + i * HS;
        const A inv = tile.l[i] > A(0) ? A(1) / tile.l[i] : A(0);
        for (int64_t dd = 0; dd < HS; ++dd) acc[dd] *= inv;
        store_row(out + q_head + (q0 + i) * HS, acc, HS, /*accumulate=*/false);
        lse[d.stats_row(b, h) + q0 + i] = tile.l[i] > A(0) ? tile.m[i] + std::log(tile.l[i]) : kNegInf<A>;
      }
    }
  }
}

// For a (query tile, key tile) pair already in `tile` (q, dout, kt, vt): leaves P in tile.s
// and dS = P * (dP - D) in tile.dp, zero where a query does not see a key. lse and D point at
// the head's rows.
template <typename A>
void probabilities_and_dscores(Tiles<A>& tile, const Dims& d, const bool* keep, const A* lse, const A* D, int64_t q0,
                               int64_t nq, int64_t k0, int64_t nk) {
  const A scale = static_cast<A>(d.s.scale);
  const int64_t HS = d.s.HS;
  tile_product(tile.s.data(), tile.q.data(), tile.kt.data(), nq, nk, HS, scale);
  tile_product(tile.dp.data(), tile.dout.data(), tile.vt.data(), nq, nk, HS, A(1));
  for (int64_t i = 0; i < nq; ++i) {
    const Span span = visible_span(d, q0 + i, k0, nk);
    A* p = tile.s.data() + i * kBlockK;
    A* ds = tile.dp.data() + i * kBlockK;
    const A row_lse = lse[q0 + i], row_d = D[q0 + i];
    for (int64_t j = 0; j < nk; ++j) {
      if (j < span.begin || j >= span.end || is_padding(keep, k0 + j)) {
        p[j] = ds[j] = A(0);
        continue;
      }
      p[j] = exp_acc(p[j] - row_lse);
      ds[j] = p[j] * (ds[j] - row_d);
    }
  }
}

template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const Acc<T>* lse, const Acc<T>* dlse, const Dims& d, bool accumulate) {
  using A = Acc<T>;
  const AttentionShape& s = d.s;
  const int64_t HS = s.HS, rows = s.B * s.NH * s.Tq;
  const A scale = static_cast<A>(s.scale);
  // D = rowsum(dout * out) - dlse: the softmax backward's row term (dlse enters through it).
  std::vector<A> D(rows);
  parallel_rows(rows, 2 * HS, [&](int64_t begin, int64_t end) {
    std::vector<A> a_scratch, b_scratch;
    for (int64_t r = begin; r < end; ++r) {
      const A* a = load_row(dout + r * HS, HS, a_scratch);
      const A* b = load_row(out + r * HS, HS, b_scratch);
      D[r] = lane_sum<A>(HS, [&](int64_t dd) { return a[dd] * b[dd]; }) - (dlse ? dlse[r] : A(0));
    }
  });

  if (dk || dv) {  // pass 1: one task per (batch, kv head, key tile), looping over the queries that see it
    const int64_t k_blocks = blocks_of(s.Tk, kBlockK), tasks = s.B * s.NKV * k_blocks;
#pragma omp parallel num_threads(threads_for(d.work(), tasks))
    {
      Tiles<A> tile(HS);
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t bkv = task / k_blocks, b = bkv / s.NKV, kv = bkv % s.NKV, k0 = (task % k_blocks) * kBlockK;
        const int64_t nk = std::min(kBlockK, s.Tk - k0), kv_head = d.kv_head(b, kv * d.group());
        const bool* keep = d.keep(b);
        load_transposed(tile.kt.data(), k + kv_head + k0 * HS, nk, HS);
        load_transposed(tile.vt.data(), v + kv_head + k0 * HS, nk, HS);
        std::fill(tile.dk.begin(), tile.dk.end(), A(0));
        std::fill(tile.dv.begin(), tile.dv.end(), A(0));
        const int64_t first = d.first_query(k0), last = d.last_query(k0 + nk - 1);
        for (int64_t g = 0; g < d.group() && first <= last; ++g) {
          const int64_t h = kv * d.group() + g, q_head = d.q_head(b, h), stats = d.stats_row(b, h);
          for (int64_t q0 = first / kBlockQ * kBlockQ; q0 <= last; q0 += kBlockQ) {
            const int64_t nq = std::min(kBlockQ, s.Tq - q0);
            load_tile(tile.q.data(), q + q_head + q0 * HS, nq, HS);
            load_tile(tile.dout.data(), dout + q_head + q0 * HS, nq, HS);
            probabilities_and_dscores(tile, d, keep, lse + stats, D.data() + stats, q0, nq, k0, nk);
            for (int64_t i = 0; i < nq; ++i) {
              const Span span = visible_span(d, q0 + i, k0, nk);
              const A* p = tile.s.data() + i * kBlockK;
              const A* ds = tile.dp.data() + i * kBlockK;
              const A* qi = tile.q.data() + i * HS;
              const A* gi = tile.dout.data() + i * HS;
              for (int64_t j = span.begin; j < span.end; ++j) {
                A* dvj = tile.dv.data() + j * HS;
                A* dkj = tile.dk.data() + j * HS;
                const A pj = p[j], dsj = ds[j];
                for (int64_t dd = 0; dd < HS; ++dd) dvj[dd] += pj * gi[dd];
                for (int64_t dd = 0; dd < HS; ++dd) dkj[dd] += dsj * qi[dd];
              }
            }
          }
        }
        for (int64_t j = 0; j < nk; ++j) {
          A* dkj = tile.dk.data() + j * HS;
          for (int64_t dd = 0; dd < HS; ++dd) dkj[dd] *= scale;
          if (dk) store_row(dk + kv_head + (k0 + j) * HS, dkj, HS, accumulate);
          if (dv) store_row(dv + kv_head + (k0 + j) * HS, tile.dv.data() + j * HS, HS, accumulate);
        }
      }
    }
  }

  if (dq) {  // pass 2: one task per query tile, looping over the key tiles it sees
    const int64_t q_blocks = blocks_of(s.Tq, kBlockQ), tasks = s.B * s.NH * q_blocks;
#pragma omp parallel num_threads(threads_for(d.work(), tasks))
    {
      Tiles<A> tile(HS);
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t bh = task / q_blocks, b = bh / s.NH, h = bh % s.NH, q0 = (task % q_blocks) * kBlockQ;
        const int64_t nq = std::min(kBlockQ, s.Tq - q0), q_head = d.q_head(b, h), stats = d.stats_row(b, h);
        const T* kh = k + d.kv_head(b, h);
        const T* vh = v + d.kv_head(b, h);
        const bool* keep = d.keep(b);
        load_tile(tile.q.data(), q + q_head + q0 * HS, nq, HS);
        load_tile(tile.dout.data(), dout + q_head + q0 * HS, nq, HS);
        std::fill(tile.acc.begin(), tile.acc.end(), A(0));
        const int64_t key_end = d.last_key(q0 + nq - 1) + 1;
        for (int64_t k0 = d.first_key(q0); k0 < key_end; k0 += kBlockK) {
          const int64_t nk = std::min(kBlockK, key_end - k0);
          load_transposed(tile.kt.data(), kh + k0 * HS, nk, HS);
          load_transposed(tile.vt.data(), vh + k0 * HS, nk, HS);
          load_tile(tile.k.data(), kh + k0 * HS, nk, HS);
          probabilities_and_dscores(tile, d, keep, lse + stats, D.data() + stats, q0, nq, k0, nk);
          for (int64_t i = 0; i < nq; ++i) {
            const Span span = visible_span(d, q0 + i, k0, nk);
            const A* ds = tile.dp.data() + i * kBlockK;
            A* dqi = tile.acc.data() + i * HS;
            for (int64_t j = span.begin; j < span.end; ++j) {
              const A dsj = ds[j];
              const A* kj = tile.k.data() + j * HS;
              for (int64_t dd = 0; dd < HS; ++dd) dqi[dd] += dsj * kj[dd];
            }
          }
        }
        for (int64_t i = 0; i < nq; ++i) {
          A* dqi = tile.acc.data() + i * HS;
          for (int64_t dd = 0; dd < HS; ++dd) dqi[dd] *= scale;
          store_row(dq + q_head + (q0 + i) * HS, dqi, HS, accumulate);
        }
      }
    }
  }
}

}  // namespace

void attention_forward_cpu(DType dtype, void* out, void* lse, const void* q, const void* k, const void* v,
                           const AttentionShape& shape) {
  const Dims dims{shape};
  FATHOM_DISPATCH_FLOATING(dtype, "causal_attention", [&]<typename T_>() {
    attention_forward(static_cast<T_*>(out), static_cast<Acc<T_>*>(lse), static_cast<const T_*>(q),
                      static_cast<const T_*>(k), static_cast<const T_*>(v), dims);
  });
}

void attention_backward_cpu(DType dtype, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                            const void* v, const void* out, const void* lse, const void* dlse,
                            const AttentionShape& shape, bool accumulate) {
  const Dims dims{shape};
  FATHOM_DISPATCH_FLOATING(dtype, "causal_attention_backward", [&]<typename T_>() {
    using A = Acc<T_>;
    attention_backward(static_cast<T_*>(dq), static_cast<T_*>(dk), static_cast<T_*>(dv), static_cast<const T_*>(dout),
                       static_cast<const T_*>(q), static_cast<const T_*>(k), static_cast<const T_*>(v),
                       static_cast<const T_*>(out), static_cast<const A*>(lse), static_cast<const A*>(dlse), dims,
                       accumulate);
  });
}

}  // namespace fathom::kernels
