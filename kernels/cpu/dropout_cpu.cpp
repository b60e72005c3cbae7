// CPU dropout over contiguous rows x width, with a mask that is a pure function of the
// element's position in the unsharded tensor (see kernels/nn_kernels.h), never of the rank,
// the thread or the layout: a tensor-parallel shard or a data-parallel micro-batch reproduces
// the single-process mask bit for bit. The mask is never stored; backward recomputes it.
// Layout: row-parallel; within a row, Philox words are generated a chunk at a time (one
// 4-word block per 4 consecutive counters) into a small buffer, then applied in a plain loop
// the compiler vectorises. Precision: 16-bit inputs scale in f32 and round once.
#include <cmath>

#include "core/philox.h"
#include "kernels/cpu/nn_cpu_common.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {
using namespace nn_cpu;

constexpr int64_t kChunk = 256;  // words per buffer fill: stays in L1 next to the row chunk

// words[i] = philox_word(seed, offset, counter + i) for i < n, one block per four counters.
void fill_words(uint32_t* words, uint64_t seed, uint64_t offset, uint64_t counter, int64_t n) {
  int64_t i = 0;
  while (i < n) {
    const uint64_t at = counter + static_cast<uint64_t>(i);
    const PhiloxWords block = philox_block(seed, offset, at >> 2);
    for (uint64_t w = at & 3; w < 4 && i < n; ++w, ++i) words[i] = block.w[w];
  }
}

template <typename T>
void dropout_rows(T* out, const T* inp, const int64_t* sample_index, int64_t rows, int64_t width, double p,
                  uint64_t seed, uint64_t offset, int64_t column_offset, int64_t full_width, bool accumulate) {
  using A = Acc<T>;
  // Keep iff word < ceil((1 - p) * 2^32): for integer words that is word < (1 - p) * 2^32.
  const uint64_t keep_below = static_cast<uint64_t>(std::ceil((1.0 - p) * 4294967296.0));
  const A scale = p < 1.0 ? static_cast<A>(1.0 / (1.0 - p)) : A(0);
  parallel_rows(rows, 16 * width, [&](int64_t begin, int64_t end) {
    uint32_t words[kChunk];
    A y[kChunk];
    for (int64_t r = begin; r < end; ++r) {
      const uint64_t row_counter = static_cast<uint64_t>(sample_index[r]) * static_cast<uint64_t>(full_width) +
                                   static_cast<uint64_t>(column_offset);
      for (int64_t c0 = 0; c0 < width; c0 += kChunk) {
        const int64_t n = std::min(kChunk, width - c0);
        fill_words(words, seed, offset, row_counter + static_cast<uint64_t>(c0), n);
        const T* x = inp + r * width + c0;
        for (int64_t i = 0; i < n; ++i) y[i] = words[i] < keep_below ? static_cast<A>(x[i]) * scale : A(0);
        store_row(out + r * width + c0, y, n, accumulate);
      }
    }
  });
}

}  // namespace

void dropout_forward_cpu(DType dtype, void* out, const void* inp, const int64_t* sample_index, int64_t rows,
                         int64_t width, double p, uint64_t seed, uint64_t offset, int64_t column_offset,
                         int64_t full_width, bool accumulate) {
  FATHOM_DISPATCH_FLOATING(dtype, "dropout", [&]<typename T>() {
    dropout_rows(static_cast<T*>(out), static_cast<const T*>(inp), sample_index, rows, width, p, seed, offset,
                 column_offset, full_width, accumulate);
  });
}

}  // namespace fathom::kernels
