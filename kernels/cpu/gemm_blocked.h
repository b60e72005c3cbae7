#pragma once
// Internal: the cache-blocked GEMM driver shared by the own kernels of every instruction set.
//
// Goto/BLIS structure: the N dimension is cut into NC-wide blocks, K into KC-deep blocks and M
// into MC-tall blocks. For each (NC, KC) block, op(B) is packed into NR-wide micro-panels; for
// each MC block, op(A) into MR-tall micro-panels; a register-blocked micro-kernel then computes
// each MR x NR tile of C from one A and one B micro-panel. Packing converts the operand to the
// kernel's type (f16/bf16 -> f32) and interleaves `kpack` consecutive k values (2 for
// vdpbf16ps, which multiplies pairs; AMX takes A rows in 32s and B in pairs, so there B's
// interleave differs from A's). Threads take disjoint blocks of C cut at tile boundaries;
// every tile's k order is the same whatever the split, so any thread count gives the same bits.
// When a thread's rows fit in 2 MC (the 256-token GPT-2 activations do), its whole A block stays
// packed for a k block while B streams past in 256-wide blocks: A is packed once per k block.

#include <cstdint>

namespace fathom::kernels::gemm_detail {

template <typename Packed, typename Acc>
struct MicroKernel {
  int mr = 0;     // tile rows
  int nr = 0;     // tile columns
  int kpack = 1;  // consecutive k values per packed element group; panels are padded to a multiple
  int b_interleave = 0;  // B's consecutive k values when not kpack (0: kpack); must divide kpack
  int64_t mc = 0, kc = 0, nc = 0;  // cache blocks: mc % mr == 0, nc % nr == 0, kc % kpack == 0
  // C[m x n] = alpha * (A panel . B panel) + beta * C over `groups` k groups; m <= mr, n <= nr.
  // beta == 0 never reads C.
  void (*run)(int64_t groups, const Packed* a, const Packed* b, Acc* c, int64_t ldc, Acc alpha, Acc beta, int m,
              int n) = nullptr;
};

template <typename In, typename Acc>
struct GemmProblem {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  Acc alpha = 1;
  const In* A = nullptr;
  int64_t lda = 0;
  const In* B = nullptr;
  int64_t ldb = 0;
  Acc beta = 0;
  Acc* C = nullptr;
  int64_t ldc = 0;
};

// Needs M, N, K >= 1. Runs on up to `threads` OpenMP threads (fewer for small problems).
template <typename In, typename Packed, typename Acc>
void blocked_gemm(const MicroKernel<Packed, Acc>& kernel, const GemmProblem<In, Acc>& problem, int threads);

}  // namespace fathom::kernels::gemm_detail
