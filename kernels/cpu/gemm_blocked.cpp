// The cache-blocked GEMM driver (see gemm_blocked.h): packing, blocking and threads. Compiled
// for the library's baseline instruction set; only the micro-kernels behind MicroKernel::run
// use wider vectors (AVX-512), chosen after a CPU check.
#include "kernels/cpu/gemm_blocked.h"
#include "kernels/cpu/gemm_skinny.h"

#include <omp.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

#include "core/half.h"

namespace fathom::kernels::gemm_detail {
namespace {

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

template <typename Packed, typename In>
Packed to_packed(In value) {
  if constexpr (std::is_same_v<Packed, In>)
    return value;
  else
    return static_cast<Packed>(static_cast<float>(value));
}

// Packs a `rows` x kc slice of an operand into micro-panels of `width` rows each (the last one
// zero-padded), `il` (interleave) consecutive k values together: element (r, k) lands in panel
// r / width at [((k / il) * width + r % width) * il + k % il], panels `panel_size` elements
// apart; k from kc up to panel_k (a multiple of il) is zero. Element (r, k) of the source is
// src[r * ld + k] when `rows_along_k` (rows contiguous in k) and src[k * ld + r] otherwise.
//
// The fast paths read memory in its own order: along a row of the source for as long as it
// runs (one stream per source row, or whole source rows across every panel), writing into
// panels that sit in L1/L2. Reading one panel's narrow strip of many long rows instead touches
// a new cache line and often a new page per k, which made packing a third of the run time.
template <typename In>
constexpr int64_t kLineElements = 64 / sizeof(In);  // elements per cache line

#if defined(__AVX2__)
// f32 rows along k into k-major panels is a transpose: 8 (or 4) rows x 8 k at a time in
// registers, instead of one scalar store per element (a quarter of the GEMM's time at K = 256).
// Rows `r0`.. of the panel at `src` (row stride ld) for k in [k0, k0 + 8); out is the panel.
inline void transpose_8x8(const float* src, int64_t ld, int64_t k0, int W, int r0, float* out) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + (r0 + i) * ld + k0);
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7
    u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h + 0], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h + 0], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(out + (k0 + j) * W + r0, _mm256_permute2f128_ps(u[j], u[4 + j], 0x20));
    _mm256_storeu_ps(out + (k0 + 4 + j) * W + r0, _mm256_permute2f128_ps(u[j], u[4 + j], 0x31));
  }
}

inline void transpose_4x8(const float* src, int64_t ld, int64_t k0, int W, int r0, float* out) {
  for (int half = 0; half < 2; ++half) {
    __m128 a = _mm_loadu_ps(src + r0 * ld + k0 + 4 * half), b = _mm_loadu_ps(src + (r0 + 1) * ld + k0 + 4 * half);
    __m128 c = _mm_loadu_ps(src + (r0 + 2) * ld + k0 + 4 * half), d = _mm_loadu_ps(src + (r0 + 3) * ld + k0 + 4 * half);
    _MM_TRANSPOSE4_PS(a, b, c, d);
    float* o = out + (k0 + 4 * half) * W + r0;
    _mm_storeu_ps(o, a);
    _mm_storeu_ps(o + W, b);
    _mm_storeu_ps(o + 2 * W, c);
    _mm_storeu_ps(o + 3 * W, d);
  }
}
#endif

template <int W, typename In, typename Packed>
void pack_full_panels(const In* src, int64_t ld, bool rows_along_k, int64_t panels, int64_t kc, int64_t panel_size,
                      Packed* dst) {
  if (rows_along_k) {
    for (int64_t p = 0; p < panels; ++p) {
      const In* panel = src + p * W * ld;
      Packed* out = dst + p * panel_size;
      int64_t k_done = 0;
      int rows_done = 0;
#if defined(__AVX2__)
      if constexpr (std::is_same_v<In, float> && std::is_same_v<Packed, float>) {
        rows_done = W / 4 * 4;
        k_done = kc / 8 * 8;
        for (int64_t k0 = 0; k0 < k_done; k0 += 8) {
          if (k0 % kLineElements<In> == 0)
            for (int r = 0; r < W; ++r) __builtin_prefetch(panel + r * ld + k0 + 4 * kLineElements<In>);
          int r0 = 0;
          for (; r0 + 8 <= W; r0 += 8) transpose_8x8(panel, ld, k0, W, r0, out);
          for (; r0 + 4 <= W; r0 += 4) transpose_4x8(panel, ld, k0, W, r0, out);
        }
      }
#endif
      // What the transposes did not cover (all of it for other types): rows past the last group
      // of 4, and k past the last group of 8.
      for (int r = 0; r < W; ++r) {
        const In* row = panel + r * ld;
        for (int64_t k0 = r < rows_done ? k_done : 0; k0 < kc; k0 += kLineElements<In>) {
          __builtin_prefetch(row + ld + k0);  // the next row, read next: short rows defeat the prefetcher
          const int64_t k1 = std::min(kc, k0 + kLineElements<In>);
          for (int64_t k = k0; k < k1; ++k) out[k * W + r] = to_packed<Packed>(row[k]);
        }
      }
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      const In* line = src + k * ld;
      for (int64_t j = 0; j < panels * W; j += kLineElements<In>) __builtin_prefetch(line + ld + j);
      for (int64_t p = 0; p < panels; ++p) {
        Packed* out = dst + p * panel_size + k * W;
        for (int r = 0; r < W; ++r) out[r] = to_packed<Packed>(line[p * W + r]);
      }
    }
  }
}

// The same for an interleave IL > 1, over the first `groups` whole groups of IL k values: a
// source row's IL values are one short copy (rows along k), or IL source rows are read side by
// side and merged into consecutive output (rows across k). The next rows are prefetched: the
// operand is often far larger than L2, and each row is a new stream.
template <int W, int IL, typename In, typename Packed>
void pack_full_groups(const In* src, int64_t ld, bool rows_along_k, int64_t panels, int64_t groups,
                      int64_t panel_size, Packed* dst) {
  if (rows_along_k) {
    for (int64_t p = 0; p < panels; ++p)
      for (int r = 0; r < W; ++r) {
        const In* row = src + (p * W + r) * ld;
        for (int64_t k = 0; k < groups * IL; k += kLineElements<In>) __builtin_prefetch(row + ld + k);
        Packed* out = dst + p * panel_size + r * IL;
        for (int64_t g = 0; g < groups; ++g)
          for (int q = 0; q < IL; ++q) out[g * W * IL + q] = to_packed<Packed>(row[g * IL + q]);
      }
  } else {
    for (int64_t g = 0; g < groups; ++g) {
      const In* lines = src + g * IL * ld;
      for (int q = 0; q < IL; ++q)
        for (int64_t j = 0; j < panels * W; j += kLineElements<In>) __builtin_prefetch(lines + (IL + q) * ld + j);
      for (int64_t p = 0; p < panels; ++p) {
        Packed* out = dst + p * panel_size + g * W * IL;
        const In* column = lines + p * W;
        for (int r = 0; r < W; ++r)
          for (int q = 0; q < IL; ++q) out[r * IL + q] = to_packed<Packed>(column[q * ld + r]);
      }
    }
  }
}

// One panel of any width and interleave, partial or not, over k groups [g0, g1), one element
// at a time.
template <typename In, typename Packed>
void pack_panel_generic(const In* src, int64_t ld, bool rows_along_k, int64_t rows, int64_t kc, int width, int il,
                        int64_t g0, int64_t g1, Packed* dst) {
  for (int64_t g = g0; g < g1; ++g)
    for (int r = 0; r < width; ++r)
      for (int q = 0; q < il; ++q) {
        const int64_t k = g * il + q;
        Packed value{};
        if (r < rows && k < kc) value = to_packed<Packed>(rows_along_k ? src[r * ld + k] : src[k * ld + r]);
        dst[(g * width + r) * il + q] = value;
      }
}

template <typename In, typename Packed>
void pack_panels(const In* src, int64_t ld, bool rows_along_k, int64_t rows, int64_t kc, int width, int il,
                 int64_t panel_k, int64_t panel_size, Packed* dst) {
  int64_t full = rows / width;  // whole panels taken by a fast path
  int64_t done_groups = kc / il;  // k groups those panels have after it
  auto plain = [&](auto w) { pack_full_panels<decltype(w)::value>(src, ld, rows_along_k, full, kc, panel_size, dst); };
  auto grouped = [&](auto w, auto i) {
    pack_full_groups<decltype(w)::value, decltype(i)::value>(src, ld, rows_along_k, full, done_groups, panel_size,
                                                             dst);
  };
  using std::integral_constant;
  if (il == 1 && width == 4) plain(integral_constant<int, 4>{});
  else if (il == 1 && width == 6) plain(integral_constant<int, 6>{});
  else if (il == 1 && width == 8) plain(integral_constant<int, 8>{});
  else if (il == 1 && width == 12) plain(integral_constant<int, 12>{});
  else if (il == 1 && width == 16) plain(integral_constant<int, 16>{});
  else if (il == 1 && width == 32) plain(integral_constant<int, 32>{});
  else if (il == 2 && width == 12) grouped(integral_constant<int, 12>{}, integral_constant<int, 2>{});
  else if (il == 2 && width == 32) grouped(integral_constant<int, 32>{}, integral_constant<int, 2>{});
  else if (il == 32 && width == 32) grouped(integral_constant<int, 32>{}, integral_constant<int, 32>{});
  else full = done_groups = 0;
  const int64_t all_groups = panel_k / il;
  for (int64_t p = 0; p * width < rows; ++p) {
    const In* panel_src = rows_along_k ? src + p * width * ld : src + p * width;
    const int64_t panel_rows = std::min<int64_t>(width, rows - p * width);
    pack_panel_generic(panel_src, ld, rows_along_k, panel_rows, kc, width, il, p < full ? done_groups : 0,
                       all_groups, dst + p * panel_size);
  }
}

// Packing buffers, kept per calling thread so repeated GEMMs (batches, training steps) do not
// allocate. 64-byte aligned: a micro-panel starts on a cache line.
struct Workspace {
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte[], Free> memory;
  size_t bytes = 0;

  std::byte* get(size_t wanted) {
    if (wanted > bytes) {
      memory.reset(static_cast<std::byte*>(::operator new[](wanted, std::align_val_t{64})));
      bytes = wanted;
    }
    return memory.get();
  }
};

// `slot` 0: a thread's own buffers; slot 1: an A block the calling thread shares with its team.
Workspace& thread_workspace(int slot = 0) {
  thread_local Workspace workspaces[2];
  return workspaces[slot];
}

template <typename Packed, typename Acc>
int b_interleave(const MicroKernel<Packed, Acc>& kernel) {
  return kernel.b_interleave > 0 ? kernel.b_interleave : kernel.kpack;
}

// Runs the micro-kernel over every tile of an (mc x nc) block from packed A and B blocks.
// B-panel-major: one B micro-panel stays in L1 while the A micro-panels stream from L2.
template <typename Packed, typename Acc>
void compute_block(const MicroKernel<Packed, Acc>& kernel, const Packed* a_packed, const Packed* b_packed, Acc* c,
                   int64_t ldc, int64_t mc, int64_t nc, int64_t groups, Acc alpha, Acc beta) {
  const int mr = kernel.mr, nr = kernel.nr;
  const int64_t panel_k = groups * kernel.kpack;
  for (int64_t jp = 0; jp * nr < nc; ++jp) {
    const int n = static_cast<int>(std::min<int64_t>(nr, nc - jp * nr));
    for (int64_t ip = 0; ip * mr < mc; ++ip) {
      const int m = static_cast<int>(std::min<int64_t>(mr, mc - ip * mr));
      kernel.run(groups, a_packed + ip * mr * panel_k, b_packed + jp * nr * panel_k, c + ip * mr * ldc + jp * nr, ldc,
                 alpha, beta, m, n);
    }
  }
}

// Up to this many A rows stay packed for a whole k block while B streams past in narrow
// blocks (the A block, <= 2 MC x KC, still fits L2). GPT-2 shapes have 256 token rows, so
// this is their common case: A is packed once per k block instead of once per B block.
template <typename Packed, typename Acc>
bool a_stays_packed(const MicroKernel<Packed, Acc>& kernel, int64_t rows) {
  return round_up(rows, kernel.mr) <= 2 * kernel.mc;
}
constexpr int64_t kStreamedNc = 256;  // B block width when A stays packed (a multiple of every nr)

// The serial blocked loops over C[i0:i1, j0:j1], with this thread's packing buffers.
template <typename In, typename Packed, typename Acc>
void gemm_block(const MicroKernel<Packed, Acc>& kernel, const GemmProblem<In, Acc>& p, int64_t i0, int64_t i1,
                int64_t j0, int64_t j1) {
  const int mr = kernel.mr, nr = kernel.nr, kpack = kernel.kpack, b_il = b_interleave(kernel);
  const bool resident = a_stays_packed(kernel, i1 - i0);
  const int64_t kc_block = std::min(kernel.kc, round_up(p.K, kpack));
  const int64_t mc_block = resident ? round_up(i1 - i0, mr) : std::min(kernel.mc, round_up(i1 - i0, mr));
  const int64_t nc_block = std::min(resident ? kStreamedNc : kernel.nc, round_up(j1 - j0, nr));
  const size_t a_bytes = round_up(static_cast<int64_t>(mc_block * kc_block * sizeof(Packed)), 64);
  std::byte* memory = thread_workspace().get(a_bytes + nc_block * kc_block * sizeof(Packed));
  Packed* a_packed = reinterpret_cast<Packed*>(memory);
  Packed* b_packed = reinterpret_cast<Packed*>(memory + a_bytes);

  auto pack_a = [&](int64_t ic, int64_t mc, int64_t pc, int64_t kc, int64_t panel_k) {
    pack_panels(p.trans_a ? p.A + pc * p.lda + ic : p.A + ic * p.lda + pc, p.lda, !p.trans_a, mc, kc, mr, kpack,
                panel_k, mr * panel_k, a_packed);
  };
  auto pack_b = [&](int64_t jc, int64_t nc, int64_t pc, int64_t kc, int64_t panel_k) {
    pack_panels(p.trans_b ? p.B + jc * p.ldb + pc : p.B + pc * p.ldb + jc, p.ldb, p.trans_b, nc, kc, nr, b_il,
                panel_k, nr * panel_k, b_packed);
  };

  for (int64_t pc = 0; pc < p.K; pc += kc_block) {
    const int64_t kc = std::min(kc_block, p.K - pc);
    const int64_t groups = (kc + kpack - 1) / kpack;
    const int64_t panel_k = groups * kpack;
    const Acc beta = pc == 0 ? p.beta : Acc(1);  // later k blocks add to what the first wrote
    if (resident) {
      pack_a(i0, i1 - i0, pc, kc, panel_k);
      for (int64_t jc = j0; jc < j1; jc += nc_block) {
        const int64_t nc = std::min(nc_block, j1 - jc);
        pack_b(jc, nc, pc, kc, panel_k);
        compute_block(kernel, a_packed, b_packed, p.C + i0 * p.ldc + jc, p.ldc, i1 - i0, nc, groups, p.alpha, beta);
      }
      continue;
    }
    // Goto's order for tall blocks: a wide B block in L3, MC-row A blocks in L2.
    for (int64_t jc = j0; jc < j1; jc += nc_block) {
      const int64_t nc = std::min(nc_block, j1 - jc);
      pack_b(jc, nc, pc, kc, panel_k);
      for (int64_t ic = i0; ic < i1; ic += mc_block) {
        const int64_t mc = std::min(mc_block, i1 - ic);
        pack_a(ic, mc, pc, kc, panel_k);
        compute_block(kernel, a_packed, b_packed, p.C + ic * p.ldc + jc, p.ldc, mc, nc, groups, p.alpha, beta);
      }
    }
  }
}

// Tall problems: each thread takes one block of a grid of C, cut at tile boundaries, and runs
// the serial loops on it alone, with no barriers. The grid minimises a thread's cycles: its
// tiles' FMAs (a 16-wide FMA pair per cycle) plus packing its rows of A and columns of B
// (about 2 cycles an element), since each thread packs the operand it shares with the others.
struct BlockGrid {
  int64_t rows = 1, cols = 1;
};

BlockGrid block_grid(int64_t m_tiles, int64_t n_tiles, int mr, int nr, int64_t blocks) {
  BlockGrid best;
  double best_cost = -1;
  for (int64_t cols = blocks; cols >= 1; --cols) {
    if (blocks % cols != 0) continue;
    const int64_t rows = blocks / cols;
    const double m = static_cast<double>((m_tiles + rows - 1) / rows * mr);
    const double n = static_cast<double>((n_tiles + cols - 1) / cols * nr);
    const double cost = m * n / 16 + 2 * (m + n);  // per unit of K
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = {rows, cols};
    }
  }
  return best;
}

// Short problems (A stays packed, see a_stays_packed): the team packs A's k block together,
// once, then each thread streams its own range of B columns past it. Two barriers per k block;
// packing A once per thread instead cost more than a third of the run time at N = 768.
template <typename In, typename Packed, typename Acc>
void gemm_shared_a(const MicroKernel<Packed, Acc>& kernel, const GemmProblem<In, Acc>& p, int threads) {
  const int mr = kernel.mr, nr = kernel.nr, kpack = kernel.kpack, b_il = b_interleave(kernel);
  const int64_t kc_block = std::min(kernel.kc, round_up(p.K, kpack));
  const int64_t m_panels = (p.M + mr - 1) / mr, n_tiles = (p.N + nr - 1) / nr;
  Packed* a_packed = reinterpret_cast<Packed*>(thread_workspace(1).get(m_panels * mr * kc_block * sizeof(Packed)));
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t j0 = std::min(p.N, n_tiles * t / team * nr), j1 = std::min(p.N, n_tiles * (t + 1) / team * nr);
    const int64_t nc_block = std::min(kStreamedNc, round_up(std::max<int64_t>(j1 - j0, 1), nr));
    Packed* b_packed = reinterpret_cast<Packed*>(thread_workspace(0).get(nc_block * kc_block * sizeof(Packed)));
    for (int64_t pc = 0; pc < p.K; pc += kc_block) {
      const int64_t kc = std::min(kc_block, p.K - pc);
      const int64_t groups = (kc + kpack - 1) / kpack;
      const int64_t panel_k = groups * kpack;
      const Acc beta = pc == 0 ? p.beta : Acc(1);
#pragma omp for schedule(static)
      for (int64_t ip = 0; ip < m_panels; ++ip) {
        const int64_t i = ip * mr;
        pack_panels(p.trans_a ? p.A + pc * p.lda + i : p.A + i * p.lda + pc, p.lda, !p.trans_a,
                    std::min<int64_t>(mr, p.M - i), kc, mr, kpack, panel_k, mr * panel_k, a_packed + ip * mr * panel_k);
      }  // (implicit barrier: A is complete)
      for (int64_t jc = j0; jc < j1; jc += nc_block) {
        const int64_t nc = std::min(nc_block, j1 - jc);
        pack_panels(p.trans_b ? p.B + jc * p.ldb + pc : p.B + pc * p.ldb + jc, p.ldb, p.trans_b, nc, kc, nr, b_il,
                    panel_k, nr * panel_k, b_packed);
        compute_block(kernel, a_packed, b_packed, p.C + jc, p.ldc, p.M, nc, groups, p.alpha, beta);
      }
#pragma omp barrier  // everyone is done with this A block before it is repacked
    }
  }
}

}  // namespace

template <typename In, typename Packed, typename Acc>
void blocked_gemm(const MicroKernel<Packed, Acc>& kernel, const GemmProblem<In, Acc>& p, int threads) {
  // About 4 MFLOP per thread before a second thread pays for its start-up.
  const double flops = 2.0 * static_cast<double>(p.M) * static_cast<double>(p.N) * static_cast<double>(p.K);
  if constexpr (std::is_same_v<In, float> && std::is_same_v<Acc, float>) {
    // A few rows (generation): B read in place, never packed.
    if (p.M <= kSkinnyRows && !p.trans_a)
      return (p.trans_b ? skinny_gemm_nt : skinny_gemm_nn)(p.M, p.N, p.K, p.alpha, p.A, p.lda, p.B, p.ldb, p.beta, p.C,
                                                           p.ldc, threads);
  }
  threads = static_cast<int>(std::clamp<double>(flops / 4e6, 1.0, std::max(threads, 1)));
  if (threads == 1) return gemm_block(kernel, p, 0, p.M, 0, p.N);
  const int64_t m_tiles = (p.M + kernel.mr - 1) / kernel.mr, n_tiles = (p.N + kernel.nr - 1) / kernel.nr;
  if (a_stays_packed(kernel, p.M) && n_tiles >= threads) return gemm_shared_a(kernel, p, threads);

  const BlockGrid grid = block_grid(m_tiles, n_tiles, kernel.mr, kernel.nr, threads);
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    // The grid assumes the full team; a smaller one (nested parallelism) runs it in turns.
    for (int64_t block = t; block < grid.rows * grid.cols; block += team) {
      const int64_t bi = block / grid.cols, bj = block % grid.cols;
      const int64_t i0 = std::min(p.M, m_tiles * bi / grid.rows * kernel.mr);
      const int64_t i1 = std::min(p.M, m_tiles * (bi + 1) / grid.rows * kernel.mr);
      const int64_t j0 = std::min(p.N, n_tiles * bj / grid.cols * kernel.nr);
      const int64_t j1 = std::min(p.N, n_tiles * (bj + 1) / grid.cols * kernel.nr);
      if (i0 < i1 && j0 < j1) gemm_block(kernel, p, i0, i1, j0, j1);
    }
  }
}

template void blocked_gemm(const MicroKernel<float, float>&, const GemmProblem<float, float>&, int);
template void blocked_gemm(const MicroKernel<double, double>&, const GemmProblem<double, double>&, int);
template void blocked_gemm(const MicroKernel<float, float>&, const GemmProblem<BFloat16, float>&, int);
template void blocked_gemm(const MicroKernel<float, float>&, const GemmProblem<Half, float>&, int);
template void blocked_gemm(const MicroKernel<BFloat16, float>&, const GemmProblem<BFloat16, float>&, int);

}  // namespace fathom::kernels::gemm_detail
