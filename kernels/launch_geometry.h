#pragma once
// Launch geometry of the CUDA kernels as plain host functions: the arithmetic that decides grid
// sizes, vector widths and rows per block is where off-by-one and overflow bugs hide, and here
// it is tested on the CPU (tests/kernels/test_launch_geometry.cpp) rather than only on a GPU.
// No CUDA include: .cu launchers and CPU tests both use it.

#include <cstdint>

namespace fathom::launch {

// Blocks for a grid-stride loop over `n` items, `threads` per block: enough to cover n once,
// capped at `max_blocks` (the loop strides over the rest). At least 1 so a launch is valid.
constexpr int grid_stride_blocks(int64_t n, int threads, int64_t max_blocks = 65535 * 16) {
  const int64_t wanted = (n + threads - 1) / threads;
  const int64_t capped = wanted < max_blocks ? wanted : max_blocks;
  return static_cast<int>(capped < 1 ? 1 : capped);
}

}  // namespace fathom::launch

// ---------------------------------------------------------------------------------------------
// Reductions (kernels/cuda/reduction_cuda.cu). Each output's reduced range (positions in
// row-major order of the reduced dims) is cut into `splits` chunks of `chunk` positions; a task
// is one (output, chunk). Block tasks: 256 threads share a chunk and combine in a fixed tree.
// Thread tasks: one thread walks its chunk serially, adjacent threads taking adjacent outputs
// (coalesced when the kept dims are the inner ones). With more than one split, partial states go
// to a workspace and a second kernel merges each output's partials in split order. The plan is a
// function of the shape alone, so results are the same on every run.
namespace fathom::launch {

inline constexpr int kReduceThreads = 256;
inline constexpr int64_t kReduceMaxSplits = 1024;
inline constexpr int64_t kReduceBlockMinChunk = 8192;  // positions per block task (32 per thread)
inline constexpr int64_t kReduceThreadMinChunk = 32;   // positions per thread task
inline constexpr int64_t kReduceSerialMax = 64;        // ranges this short always go thread per output
inline constexpr int64_t kReduceTargetBlocks = 1024;   // enough blocks to fill an H100/H200 several times
inline constexpr int64_t kReduceTargetThreads = int64_t{1} << 18;
inline constexpr int64_t kReduceStateBytes = 32;  // the largest partial state (variance: n, mean, m2)

struct ReducePlan {
  bool thread_tasks = false;  // one thread per task; else one block per task
  int64_t splits = 1;
  int64_t chunk = 1;
  int64_t tasks = 0;            // outputs * splits
  int64_t workspace_bytes = 0;  // partial states; 0 when splits == 1
};

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// `kept_inner_stride` / `reduced_inner_stride`: |stride| of the innermost kept / reduced dim after
// merging (ignored where there is no such dim: outputs <= 1, reduced <= 1).
constexpr ReducePlan plan_reduction(int64_t outputs, int64_t reduced, int64_t kept_inner_stride,
                                    int64_t reduced_inner_stride) {
  ReducePlan plan;
  plan.thread_tasks =
      outputs > 1 && (reduced <= kReduceSerialMax || kept_inner_stride < reduced_inner_stride);
  const int64_t min_chunk = plan.thread_tasks ? kReduceThreadMinChunk : kReduceBlockMinChunk;
  const int64_t target = plan.thread_tasks ? kReduceTargetThreads : kReduceTargetBlocks;
  const int64_t room = outputs > 0 ? ceil_div(target, outputs) : 1;
  int64_t splits = ceil_div(reduced, min_chunk);
  splits = splits < room ? splits : room;
  splits = splits < kReduceMaxSplits ? splits : kReduceMaxSplits;
  splits = splits < 1 ? 1 : splits;
  plan.chunk = reduced > 0 ? ceil_div(reduced, splits) : 1;
  plan.splits = reduced > 0 ? ceil_div(reduced, plan.chunk) : 1;  // no empty chunk at the end
  plan.tasks = outputs * plan.splits;
  plan.workspace_bytes = plan.splits > 1 ? plan.tasks * kReduceStateBytes : 0;
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Row kernels over contiguous (N, C) rows: softmax, layernorm, rmsnorm
// (kernels/cuda/softmax_cuda.cu, normalization_cuda.cu). Rows up to 1024 elements get one warp
// each (8 rows per 256-thread block); longer rows a whole block. Blocks loop over rows with a
// grid stride, so N beyond the grid limit is fine. Rows over 4096 elements get 512 threads.

inline constexpr int kWarpSize = 32;
inline constexpr int kRowBlockThreads = 256;
inline constexpr int kRowBlockMaxThreads = 512;  // the row kernels' __launch_bounds__
inline constexpr int64_t kWarpRowMax = 1024;

struct RowGeometry {
  int threads_per_row = kWarpSize;
  int block_threads = kRowBlockThreads;
  int rows_per_block = kRowBlockThreads / kWarpSize;
  int blocks = 1;
};

constexpr RowGeometry row_geometry(int64_t N, int64_t C) {
  RowGeometry g;
  if (C > kWarpRowMax) {
    g.block_threads = C > 4096 ? kRowBlockMaxThreads : kRowBlockThreads;
    g.threads_per_row = g.block_threads;
  }
  g.rows_per_block = g.block_threads / g.threads_per_row;
  g.blocks = grid_stride_blocks(N, g.rows_per_block);
  return g;
}

// Elements per 128-bit access: 16 bytes' worth when every row of every operand starts 16-byte
// aligned (all base pointers aligned and rows a whole number of 16-byte words), else 1.
constexpr int vector_width(int64_t C, int element_bytes, bool pointers_aligned) {
  const int width = 16 / element_bytes;
  return pointers_aligned && width > 1 && C % width == 0 ? width : 1;
}

// ---------------------------------------------------------------------------------------------
// Column sums over rows (layernorm/rmsnorm dweight, dbias): a grid of column tiles x row
// blocks; each thread sums one column over its row block serially into a workspace row, then
// one thread per column adds the row blocks' partials in block order. Chosen from (N, C) only.

inline constexpr int kColumnThreads = 256;
inline constexpr int64_t kColumnMinRows = 32;
inline constexpr int64_t kColumnMaxRowBlocks = 1024;

struct ColumnPlan {
  int64_t rows_per_block = 1;
  int64_t row_blocks = 1;  // also the workspace rows: row_blocks * C partial sums
  int64_t column_blocks = 1;
};

constexpr ColumnPlan plan_column_sums(int64_t N, int64_t C) {
  ColumnPlan plan;
  plan.column_blocks = C > 0 ? ceil_div(C, kColumnThreads) : 1;
  const int64_t room = ceil_div(kReduceTargetBlocks, plan.column_blocks);
  int64_t blocks = ceil_div(N, kColumnMinRows);
  blocks = blocks < room ? blocks : room;
  blocks = blocks < kColumnMaxRowBlocks ? blocks : kColumnMaxRowBlocks;
  blocks = blocks < 1 ? 1 : blocks;
  plan.rows_per_block = N > 0 ? ceil_div(N, blocks) : 1;
  plan.row_blocks = N > 0 ? ceil_div(N, plan.rows_per_block) : 1;
  return plan;
}

}  // namespace fathom::launch

// ---------------------------------------------------------------------------------------------
// Causal attention (kernels/cuda/attention_cuda.cu). A block of kAttnWarps warps owns a tile of
// kAttnBlockRows rows of one (batch, head): query rows in the forward and dq kernels, key rows in
// the dk/dv kernel, kAttnRowsPerWarp per warp. The other side streams through shared memory in
// tiles of kAttnTile rows, one per lane. Head sizes up to 128 come in three tiers (32, 64, 128)
// that fix the per-lane register arrays; shared tiles are zero-padded up to the tier. Rows read
// one per lane get a padded stride (tier + 1) so the lanes hit different banks.
namespace fathom::launch {

inline constexpr int kAttnWarps = 4;
inline constexpr int kAttnRowsPerWarp = 4;
inline constexpr int kAttnBlockRows = kAttnWarps * kAttnRowsPerWarp;
inline constexpr int kAttnTile = 32;
inline constexpr int kAttnThreads = kAttnWarps * 32;
inline constexpr int kAttnMaxHeadSize = 128;

// The tier a head size runs in; 0 when it is too large.
constexpr int attention_head_tier(int64_t HS) {
  return HS <= 32 ? 32 : HS <= 64 ? 64 : HS <= kAttnMaxHeadSize ? 128 : 0;
}

constexpr int64_t attention_row_blocks(int64_t T) { return ceil_div(T, kAttnBlockRows); }

// Task `task` of BH * blocks: consecutive tasks take the same row block of consecutive heads, in
// order of decreasing work, so the long blocks start first and the short ones fill in at the end.
// Causal work grows with the query block (forward, dq: heaviest_last) and shrinks with the key
// block (dk/dv).
struct AttentionTask {
  int64_t bh = 0;
  int64_t block = 0;
};
constexpr AttentionTask attention_task(int64_t task, int64_t BH, int64_t blocks, bool heaviest_last) {
  const int64_t rank = task / BH;
  return {task % BH, heaviest_last ? blocks - 1 - rank : rank};
}

// Dynamic shared memory in bytes, for compute-type elements of `acc_bytes` bytes.
// forward: own q rows [kAttnBlockRows][tier]; k tile [kAttnTile][tier + 1]; v tile [kAttnTile][tier].
constexpr int64_t attention_forward_smem(int tier, int acc_bytes) {
  return (int64_t{kAttnBlockRows} * tier + int64_t{kAttnTile} * (tier + 1) + int64_t{kAttnTile} * tier) * acc_bytes;
}
// dq: own q and dout rows [kAttnBlockRows][tier] each; k and v tiles [kAttnTile][tier + 1] each.
constexpr int64_t attention_dq_smem(int tier, int acc_bytes) {
  return (2 * int64_t{kAttnBlockRows} * tier + 2 * int64_t{kAttnTile} * (tier + 1)) * acc_bytes;
}
// dk/dv: own k and v rows [kAttnBlockRows][tier] each; q and dout tiles [kAttnTile][tier + 1]
// each; the tile's lse and D [kAttnTile] each.
constexpr int64_t attention_dkdv_smem(int tier, int acc_bytes) {
  return (2 * int64_t{kAttnBlockRows} * tier + 2 * int64_t{kAttnTile} * (tier + 1) + 2 * int64_t{kAttnTile}) *
         acc_bytes;
}

// The first query tile (of kAttnTile rows) that can see key `key`: queries before it are masked.
constexpr int64_t attention_first_query_tile_start(int64_t key) { return key / kAttnTile * kAttnTile; }

}  // namespace fathom::launch

// ---------------------------------------------------------------------------------------------
// Embedding, cross-entropy, dropout and the fused optimizer steps (kernels/cuda/embedding_cuda.cu,
// cross_entropy_cuda.cu, dropout_cuda.cu, optimizer_cuda.cu).
namespace fathom::launch {

// --- embedding backward: bucket positions by token, then a block per (token, column tile) sums
// its dout rows in position order. Threads per block: enough 32-lane warps for one tile of
// `packs` vectors (a row of C elements read `packs` vectors at a time), at most 256, so narrow
// rows do not idle most of a block.
inline constexpr int kEmbeddingMaxThreads = 256;

struct EmbeddingSumGeometry {
  int threads = 32;
  int64_t tiles = 1;  // column tiles per token; a tile is `threads` vectors wide
  int64_t tasks = 0;  // V * tiles, walked by a grid-stride loop
  int blocks = 1;
};

constexpr EmbeddingSumGeometry embedding_sum_geometry(int64_t V, int64_t packs) {
  EmbeddingSumGeometry g;
  const int64_t warps = (packs + 31) / 32;
  const int64_t threads = warps * 32;
  g.threads = static_cast<int>(threads < 32 ? 32 : threads > kEmbeddingMaxThreads ? kEmbeddingMaxThreads : threads);
  g.tiles = packs > 0 ? (packs + g.threads - 1) / g.threads : 0;
  g.tasks = V * g.tiles;
  g.blocks = grid_stride_blocks(g.tasks, 1);
  return g;
}

// Bits of the sort keys: tokens 0..V-1 and the bucket V that collects out-of-range indices.
constexpr int embedding_sort_bits(int64_t V) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) <= V) ++bits;
  return bits;
}

// The backward's device workspace, carved from one buffer: token counts that become bucket
// starts (V + 1 int32, exclusive prefix sums), sort keys and positions before and after the
// stable radix sort (N uint32 / int32 each), and the sort's own temporary storage. Every part
// starts on a 256-byte boundary.
struct EmbeddingWorkspace {
  int64_t first = 0, keys_in = 0, keys_out = 0, positions_in = 0, positions_out = 0, sort_temp = 0;
  int64_t bytes = 0;
};

constexpr int64_t align_up(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

constexpr EmbeddingWorkspace embedding_workspace(int64_t N, int64_t V, int64_t sort_temp_bytes) {
  EmbeddingWorkspace w;
  int64_t at = 0;
  auto take = [&at](int64_t size) {
    const int64_t start = at;
    at = align_up(at + size, 256);
    return start;
  };
  w.first = take((V + 1) * 4);
  w.keys_in = take(N * 4);
  w.keys_out = take(N * 4);
  w.positions_in = take(N * 4);
  w.positions_out = take(N * 4);
  w.sort_temp = take(sort_temp_bytes);
  w.bytes = at;
  return w;
}

// --- cross-entropy: one block per row (grid-stride over rows); wide vocabularies get more
// threads so each thread still streams a few hundred bytes of the row.
constexpr int cross_entropy_threads(int64_t V) { return V <= 2048 ? 128 : V <= 16384 ? 256 : 512; }
inline constexpr int kCrossEntropyMaxThreads = 512;
inline constexpr int kLossSumThreads = 512;  // the one block that adds the row losses

// --- dropout: element c of a row reads Philox word (base + c) & 3 of block (base + c) >> 2, with
// base = sample_index * full_width + column_offset. A thread takes one whole Philox block of a
// row (one 10-round evaluation for up to four elements): group g of a row whose base is `lead`
// words into its first block holds the row's elements [4g - lead, 4g + 4 - lead) clipped to
// [0, width).
struct ElementRange {
  int64_t begin = 0, end = 0;
};

constexpr int64_t dropout_groups_per_row(int64_t width) { return width > 0 ? (width + 3 + 3) / 4 : 0; }

constexpr ElementRange dropout_group(int64_t lead, int64_t width, int64_t group) {
  const int64_t begin = 4 * group - lead, end = 4 * group + 4 - lead;
  return {begin < 0 ? 0 : begin > width ? width : begin, end > width ? width : end < 0 ? 0 : end};
}

// --- fused optimizer steps: each tensor is cut into chunks of kStepChunk elements, a block per
// chunk (grid-stride). Multi-tensor launches find a chunk's tensor by binary search over the
// tensors' first chunks (tensors without elements are left out of the table).
inline constexpr int kStepThreads = 256;
inline constexpr int64_t kStepChunk = 16384;  // 16 passes of 256 threads x 4 floats
inline constexpr int64_t kStepMaxBlocks = 65535 * 16;

constexpr int64_t step_chunks(int64_t n) { return (n + kStepChunk - 1) / kStepChunk; }

// The entry t with first_chunk(t) <= chunk < first_chunk(t + 1), for entries in increasing
// first_chunk order of which the first starts at 0 (`first_chunk(t)` returns entry t's).
template <typename FirstChunk>
constexpr int64_t chunk_owner(FirstChunk&& first_chunk, int64_t count, int64_t chunk) {
  int64_t low = 0, high = count - 1;  // the answer lies in [low, high]
  while (low < high) {
    const int64_t mid = low + (high - low + 1) / 2;
    if (first_chunk(mid) <= chunk) low = mid;
    else high = mid - 1;
  }
  return low;
}

// 4-float (16-byte) accesses when every f32 buffer is 16-byte aligned and the parameter copy
// (`copy_bytes` per element, 0 = none) is aligned to 4 of its elements; absent buffers are 0.
// The chunk starts are multiples of 4 elements, so every chunk then starts aligned.
constexpr bool step_vectorizable(uint64_t params, uint64_t grads, uint64_t state0, uint64_t state1, uint64_t copy,
                                 int copy_bytes) {
  const bool floats = (params | grads | state0 | state1) % 16 == 0;
  return floats && (copy_bytes == 0 || copy % (4 * static_cast<uint64_t>(copy_bytes)) == 0);
}

}  // namespace fathom::launch
