#pragma once
// Internal: the register-blocked micro-kernel, written once over a small SIMD interface `S` and
// instantiated per instruction set (AVX-512, AVX2, portable vectors) by the files that include
// it inside their target region, so the same loop runs everywhere and is tested everywhere.
//
// The tile is MR rows x NV vectors of S::kLanes columns. Per k group it loads NV vectors of
// the B micro-panel, broadcasts each row's A value (or bf16 pair) and multiply-adds: MR * NV
// accumulators stay in registers for the whole KC block. S provides:
//   Reg zero(); Reg load_b(const Packed*); Reg broadcast_a(const Packed*);
//   Reg madd(Reg a, Reg b, Reg acc)            acc + a * b (per pair of k for bf16)
//   Reg load_c(const Acc*); void store_c(Acc*, Reg); Reg scale(Reg, Acc); Reg scale_add(Reg, Acc, Reg c)
//   (scale_add(x, s, c) = x * s + c).

#include <cstdint>

namespace fathom::kernels::gemm_detail {

template <typename S, int MR, int NV>
inline void simd_micro_kernel(int64_t groups, const typename S::Packed* a, const typename S::Packed* b,
                              typename S::Acc* c, int64_t ldc, typename S::Acc alpha, typename S::Acc beta, int m,
                              int n) {
  using Reg = typename S::Reg;
  using Acc = typename S::Acc;
  constexpr int kLanes = S::kLanes, kPack = S::kPack, NR = NV * kLanes;
  Reg acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = S::zero();

  // C is read only after the k loop: fetch its rows now so that read does not stall.
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
    if (i < m) __builtin_prefetch(c + i * ldc, 1);

#pragma GCC unroll 4
  for (int64_t g = 0; g < groups; ++g) {
    Reg bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = S::load_b(b + v * kLanes * kPack);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const Reg av = S::broadcast_a(a + i * kPack);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = S::madd(av, bv[v], acc[i][v]);
    }
    a += MR * kPack;
    b += NR * kPack;
  }

  if (m == MR && n == NR) {
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        Acc* out = c + i * ldc + v * kLanes;
        // beta == 0 must not read C: it may hold NaN from an uninitialised buffer.
        if (beta == Acc(0))
          S::store_c(out, S::scale(acc[i][v], alpha));
        else if (beta == Acc(1))
          S::store_c(out, S::scale_add(acc[i][v], alpha, S::load_c(out)));
        else
          S::store_c(out, S::scale_add(acc[i][v], alpha, S::scale(S::load_c(out), beta)));
      }
    return;
  }
  // A partial tile at the matrix edge: spill the accumulators, write back only what exists.
  alignas(64) Acc tile[MR * NR];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) S::store_c(tile + i * NR + v * kLanes, acc[i][v]);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      Acc& out = c[i * ldc + j];
      const Acc value = alpha * tile[i * NR + j];
      out = beta == Acc(0) ? value : value + beta * out;
    }
}

}  // namespace fathom::kernels::gemm_detail
