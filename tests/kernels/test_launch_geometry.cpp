// Launch geometry of the CUDA kernels, checked on the CPU.
#include <catch2/catch.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/launch_geometry.h"
#include "kernels/reduction_kernels.h"

using namespace fathom::launch;

TEST_CASE("grid_stride_blocks covers n once and stays within the cap", "[launch_geometry]") {
  CHECK(grid_stride_blocks(0, 256) == 1);
  CHECK(grid_stride_blocks(1, 256) == 1);
  CHECK(grid_stride_blocks(256, 256) == 1);
  CHECK(grid_stride_blocks(257, 256) == 2);
  CHECK(grid_stride_blocks(int64_t{1} << 40, 256) == 65535 * 16);
  CHECK(grid_stride_blocks(1000, 128, 4) == 4);
}

// --- reductions (kernels/cuda/reduction_cuda.cu) ---

TEST_CASE("plan_reduction cuts every reduced range into non-empty chunks that cover it", "[launch_geometry]") {
  for (int64_t outputs : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{768}, int64_t{100000}, int64_t{1} << 33}) {
    for (int64_t reduced : {int64_t{0}, int64_t{1}, int64_t{64}, int64_t{65}, int64_t{8192}, int64_t{8193},
                            int64_t{20001}, int64_t{1} << 20, int64_t{1} << 40}) {
      for (auto [kept_stride, reduced_stride] : {std::pair<int64_t, int64_t>{1, 1000}, {1000, 1}}) {
        INFO("outputs " << outputs << ", reduced " << reduced << ", strides " << kept_stride << "/" << reduced_stride);
        const ReducePlan p = plan_reduction(outputs, reduced, kept_stride, reduced_stride);
        REQUIRE(p.splits >= 1);
        REQUIRE(p.splits <= kReduceMaxSplits);
        REQUIRE(p.chunk >= 1);
        CHECK(p.splits * p.chunk >= reduced);
        if (reduced > 0) CHECK((p.splits - 1) * p.chunk < reduced);  // the last chunk is not empty
        CHECK(p.tasks == outputs * p.splits);
        CHECK(p.workspace_bytes == (p.splits > 1 ? p.tasks * kReduceStateBytes : 0));
      }
    }
  }
}

TEST_CASE("plan_reduction: thread tasks when the kept dims are inner or the range is short", "[launch_geometry]") {
  // Bias gradient: [8192, 768] over dim 0. Kept stride 1: one thread per (column, chunk of 32 rows).
  const ReducePlan bias = plan_reduction(768, 8192, 1, 768);
  CHECK(bias.thread_tasks);
  CHECK(bias.splits == 256);
  CHECK(bias.chunk == 32);
  CHECK(bias.workspace_bytes == 768 * 256 * kReduceStateBytes);
  // [2, 20001] over dim 1: contiguous rows, a block per (row, chunk of ~8192).
  const ReducePlan rows = plan_reduction(2, 20001, 20001, 1);
  CHECK_FALSE(rows.thread_tasks);
  CHECK(rows.splits == 3);
  CHECK(rows.chunk == 6667);
  // Everything into one output: blocks, two passes.
  const ReducePlan all = plan_reduction(1, 30000, 0, 1);
  CHECK_FALSE(all.thread_tasks);
  CHECK(all.splits == 4);
  CHECK(all.chunk == 7500);
  // A million pairs summed over the (contiguous) last dim: a block per output would idle 254 of
  // 256 threads, so one thread per output, in one pass.
  const ReducePlan pairs = plan_reduction(1000000, 2, 2, 1);
  CHECK(pairs.thread_tasks);
  CHECK(pairs.splits == 1);
  CHECK(pairs.workspace_bytes == 0);
  // One huge output: as many splits as the cap allows.
  const ReducePlan huge = plan_reduction(1, int64_t{1} << 40, 0, 1);
  CHECK(huge.splits == kReduceTargetBlocks);
  // Nothing to reduce (sum over an empty dim): one pass writing the identity.
  const ReducePlan empty = plan_reduction(5, 0, 1, 0);
  CHECK(empty.splits == 1);
  CHECK(empty.workspace_bytes == 0);
}

// --- row kernels (softmax, layernorm, rmsnorm) ---

TEST_CASE("row_geometry: a warp per row up to 1024 elements, else a block", "[launch_geometry]") {
  const RowGeometry warp = row_geometry(17, 1024);
  CHECK(warp.threads_per_row == 32);
  CHECK(warp.block_threads == 256);
  CHECK(warp.rows_per_block == 8);
  CHECK(warp.blocks == 3);  // 17 rows, 8 per block
  const RowGeometry block = row_geometry(17, 1025);
  CHECK(block.threads_per_row == 256);
  CHECK(block.rows_per_block == 1);
  CHECK(block.blocks == 17);
  const RowGeometry wide = row_geometry(5, 50257);
  CHECK(wide.threads_per_row == kRowBlockMaxThreads);
  CHECK(wide.block_threads == kRowBlockMaxThreads);
  CHECK(row_geometry(0, 8).blocks == 1);
  CHECK(row_geometry(int64_t{1} << 40, 8).blocks == 65535 * 16);  // the grid-stride loop covers the rest
}

TEST_CASE("vector_width: 16 bytes per access only when every row is 16-byte aligned", "[launch_geometry]") {
  CHECK(vector_width(768, 4, true) == 4);
  CHECK(vector_width(768, 4, false) == 1);
  CHECK(vector_width(770, 4, true) == 1);  // rows after the first start mid-vector
  CHECK(vector_width(37, 2, true) == 1);
  CHECK(vector_width(40, 2, true) == 8);
  CHECK(vector_width(6, 8, true) == 2);
  CHECK(vector_width(3, 8, true) == 1);
  CHECK(vector_width(0, 4, true) == 4);  // nothing to load either way
}

TEST_CASE("plan_column_sums: row blocks that cover N once, chosen from N and C", "[launch_geometry]") {
  const ColumnPlan small = plan_column_sums(300, 257);
  CHECK(small.column_blocks == 2);
  CHECK(small.rows_per_block == 30);
  CHECK(small.row_blocks == 10);
  const ColumnPlan gpt = plan_column_sums(16 * 1024, 768);
  CHECK(gpt.column_blocks == 3);
  CHECK(gpt.row_blocks == 342);  // 1024 blocks in all, over the 3 column tiles
  const ColumnPlan none = plan_column_sums(0, 8);
  CHECK(none.row_blocks == 1);  // one (empty) block still writes the zero sums
  for (int64_t N : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{1000}, int64_t{1} << 20, int64_t{1} << 36}) {
    for (int64_t C : {int64_t{1}, int64_t{256}, int64_t{257}, int64_t{50257}}) {
      INFO("N " << N << ", C " << C);
      const ColumnPlan p = plan_column_sums(N, C);
      CHECK(p.row_blocks >= 1);
      CHECK(p.row_blocks <= kColumnMaxRowBlocks);
      CHECK(p.row_blocks * p.rows_per_block >= N);
      CHECK((p.row_blocks - 1) * p.rows_per_block < N);
      CHECK(p.column_blocks * kColumnThreads >= C);
    }
  }
}

// --- the reduction layout both the CPU and the CUDA kernels receive ---

TEST_CASE("merge_dims drops size-1 dims and merges neighbours that step over each other", "[launch_geometry]") {
  using fathom::kernels::merge_dims;
  using fathom::kernels::ReduceLayout;
  // Contiguous [4, 5, 6, 7] reducing dims 1 and 2 (kept 0 and 3): the reduced pair merges.
  ReduceLayout inner{{4, 7}, {210, 1}, {5, 6}, {42, 7}};
  ReduceLayout merged = merge_dims(inner);
  CHECK(merged.kept_sizes == fathom::Shape{4, 7});
  CHECK(merged.kept_strides == fathom::Strides{210, 1});
  CHECK(merged.reduced_sizes == fathom::Shape{30});
  CHECK(merged.reduced_strides == fathom::Strides{7});
  // Everything reduced of a contiguous [2, 1, 3]: one dim of 6; the kept group is empty.
  merged = merge_dims(ReduceLayout{{}, {}, {2, 1, 3}, {3, 3, 1}});
  CHECK(merged.kept_sizes.empty());
  CHECK(merged.reduced_sizes == fathom::Shape{6});
  CHECK(merged.reduced_strides == fathom::Strides{1});
  // A transposed view [3, 4] with strides [1, 3] does not merge: the order would change.
  merged = merge_dims(ReduceLayout{{}, {}, {3, 4}, {1, 3}});
  CHECK(merged.reduced_sizes == fathom::Shape{3, 4});
  // Broadcast (stride 0) dims merge with each other.
  merged = merge_dims(ReduceLayout{{2, 3}, {0, 0}, {}, {}});
  CHECK(merged.kept_sizes == fathom::Shape{6});
  CHECK(merged.kept_strides == fathom::Strides{0});
  // An empty group stays empty in numel.
  merged = merge_dims(ReduceLayout{{3}, {1}, {0, 5}, {5, 1}});
  CHECK(merged.reduced_sizes == fathom::Shape{0});
}

// --- causal attention (kernels/cuda/attention_cuda.cu) ---

TEST_CASE("attention_head_tier: the smallest of 32, 64, 128 that holds the head; 0 beyond", "[launch_geometry]") {
  CHECK(attention_head_tier(0) == 32);
  CHECK(attention_head_tier(1) == 32);
  CHECK(attention_head_tier(32) == 32);
  CHECK(attention_head_tier(33) == 64);
  CHECK(attention_head_tier(64) == 64);
  CHECK(attention_head_tier(65) == 128);
  CHECK(attention_head_tier(128) == 128);
  CHECK(attention_head_tier(129) == 0);
  CHECK(attention_head_tier(int64_t{1} << 40) == 0);
  // Each lane holds tier / 32 head dims of its rows.
  for (int64_t hs = 0; hs <= kAttnMaxHeadSize; ++hs) CHECK(attention_head_tier(hs) % kWarpSize == 0);
}

TEST_CASE("attention_task visits every (head, row block) once, heaviest blocks first", "[launch_geometry]") {
  CHECK(kAttnBlockRows == kAttnWarps * kAttnRowsPerWarp);
  CHECK(kAttnThreads == kAttnWarps * kWarpSize);
  for (int64_t BH : {int64_t{1}, int64_t{3}, int64_t{192}}) {
    for (int64_t T : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{1024}}) {
      for (bool heaviest_last : {false, true}) {
        INFO("BH " << BH << ", T " << T << ", heaviest_last " << heaviest_last);
        const int64_t blocks = attention_row_blocks(T);
        CHECK(blocks * kAttnBlockRows >= T);
        CHECK((blocks - 1) * kAttnBlockRows < T);
        std::vector<int> seen(static_cast<size_t>(BH * blocks), 0);
        int64_t previous_block = heaviest_last ? blocks : -1;
        for (int64_t task = 0; task < BH * blocks; ++task) {
          const AttentionTask t = attention_task(task, BH, blocks, heaviest_last);
          REQUIRE(t.bh >= 0);
          REQUIRE(t.bh < BH);
          REQUIRE(t.block >= 0);
          REQUIRE(t.block < blocks);
          ++seen[static_cast<size_t>(t.bh * blocks + t.block)];
          // Causal work grows with the query block and shrinks with the key block.
          if (heaviest_last) CHECK(t.block <= previous_block);
          else CHECK(t.block >= previous_block);
          previous_block = t.block;
        }
        for (int count : seen) REQUIRE(count == 1);
      }
    }
  }
  CHECK(attention_task(0, 192, 64, true).block == 63);
  CHECK(attention_task(0, 192, 64, false).block == 0);
  // Beyond 2^31 tasks the arithmetic stays in 64 bits.
  const AttentionTask far = attention_task((int64_t{1} << 40) + 5, int64_t{1} << 20, int64_t{1} << 21, false);
  CHECK(far.bh == 5);
  CHECK(far.block == int64_t{1} << 20);
}

TEST_CASE("attention shared memory fits an H100/H200 block for every tier and compute type", "[launch_geometry]") {
  constexpr int64_t kMaxDynamicShared = 227 * 1024;  // sm_90's per-block opt-in limit
  CHECK(attention_forward_smem(128, 4) == (16 * 128 + 32 * 129 + 32 * 128) * 4);
  CHECK(attention_dq_smem(64, 4) == (2 * 16 * 64 + 2 * 32 * 65) * 4);
  CHECK(attention_dkdv_smem(32, 8) == (2 * 16 * 32 + 2 * 32 * 33 + 2 * 32) * 8);
  for (int tier : {32, 64, 128})
    for (int bytes : {4, 8}) {
      INFO("tier " << tier << ", " << bytes << "-byte compute type");
      CHECK(attention_forward_smem(tier, bytes) <= kMaxDynamicShared);
      CHECK(attention_dq_smem(tier, bytes) <= kMaxDynamicShared);
      CHECK(attention_dkdv_smem(tier, bytes) <= kMaxDynamicShared);
    }
  // f32 at head size 64 (GPT-2) stays under the 48 KiB that needs no opt-in.
  CHECK(attention_forward_smem(64, 4) <= 48 * 1024);
  CHECK(attention_dq_smem(64, 4) <= 48 * 1024);
  CHECK(attention_dkdv_smem(64, 4) <= 48 * 1024);
}

TEST_CASE("attention_first_query_tile_start: the query tile holding the key's own position", "[launch_geometry]") {
  CHECK(attention_first_query_tile_start(0) == 0);
  CHECK(attention_first_query_tile_start(16) == 0);
  CHECK(attention_first_query_tile_start(31) == 0);
  CHECK(attention_first_query_tile_start(32) == 32);
  CHECK(attention_first_query_tile_start(48) == 32);
  for (int64_t key = 0; key < 200; ++key) {
    const int64_t start = attention_first_query_tile_start(key);
    CHECK(start % kAttnTile == 0);
    CHECK(start <= key);             // the key's own query is in a visited tile
    CHECK(key - start < kAttnTile);  // and every skipped tile lies entirely before the key
  }
}

// --- embedding, cross-entropy, dropout, optimizer steps ---

TEST_CASE("embedding_sum_geometry: whole warps up to 256 threads, tiles that cover a row once", "[launch_geometry]") {
  const EmbeddingSumGeometry narrow = embedding_sum_geometry(50257, 3);  // C = 12 f32 in 16-byte vectors
  CHECK(narrow.threads == 32);
  CHECK(narrow.tiles == 1);
  CHECK(narrow.tasks == 50257);
  CHECK(narrow.blocks == 50257);
  const EmbeddingSumGeometry gpt2 = embedding_sum_geometry(50257, 96);  // C = 768 bf16, 8 per vector
  CHECK(gpt2.threads == 96);
  CHECK(gpt2.tiles == 1);
  const EmbeddingSumGeometry wide = embedding_sum_geometry(7, 1000);  // C = 1000, unaligned
  CHECK(wide.threads == 256);
  CHECK(wide.tiles == 4);
  CHECK(wide.tasks == 28);
  for (int64_t packs : {int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{255}, int64_t{257}, int64_t{4097}}) {
    const EmbeddingSumGeometry g = embedding_sum_geometry(5, packs);
    INFO("packs " << packs);
    CHECK(g.threads % 32 == 0);
    CHECK(g.threads <= kEmbeddingMaxThreads);
    CHECK(g.tiles * g.threads >= packs);
    CHECK((g.tiles - 1) * g.threads < packs);  // no empty tile
  }
  CHECK(embedding_sum_geometry(5, 0).tasks == 0);  // C == 0: nothing to launch
  CHECK(embedding_sum_geometry(0, 8).tasks == 0);
  CHECK(embedding_sum_geometry(int64_t{1} << 30, 4).blocks == 65535 * 16);  // the grid-stride cap
}

TEST_CASE("embedding_sort_bits holds every token and the out-of-range bucket V", "[launch_geometry]") {
  CHECK(embedding_sort_bits(0) == 1);
  CHECK(embedding_sort_bits(1) == 1);
  CHECK(embedding_sort_bits(2) == 2);
  CHECK(embedding_sort_bits(7) == 3);
  CHECK(embedding_sort_bits(8) == 4);
  CHECK(embedding_sort_bits(50257) == 16);
  CHECK(embedding_sort_bits(65535) == 16);
  CHECK(embedding_sort_bits(65536) == 17);
  CHECK(embedding_sort_bits((int64_t{1} << 31) - 1) == 31);
}

TEST_CASE("embedding_workspace: aligned, disjoint parts in order", "[launch_geometry]") {
  for (auto [N, V, temp] : {std::tuple<int64_t, int64_t, int64_t>{0, 5, 0}, {1, 1, 1}, {8192, 50257, 1234567},
                            {1000001, 3, 77}}) {
    INFO("N " << N << ", V " << V << ", sort temp " << temp);
    const EmbeddingWorkspace w = embedding_workspace(N, V, temp);
    const int64_t starts[] = {w.first, w.keys_in, w.keys_out, w.positions_in, w.positions_out, w.sort_temp, w.bytes};
    const int64_t sizes[] = {(V + 1) * 4, N * 4, N * 4, N * 4, N * 4, temp};
    CHECK(w.first == 0);
    for (int k = 0; k < 6; ++k) {
      CHECK(starts[k] % 256 == 0);
      CHECK(starts[k] + sizes[k] <= starts[k + 1]);
      CHECK(starts[k + 1] - (starts[k] + sizes[k]) < 256);  // no more padding than alignment needs
    }
  }
  CHECK(align_up(0, 256) == 0);
  CHECK(align_up(1, 256) == 256);
  CHECK(align_up(256, 256) == 256);
}

TEST_CASE("cross_entropy_threads grows with the vocabulary and stays within the launch bound", "[launch_geometry]") {
  CHECK(cross_entropy_threads(7) == 128);
  CHECK(cross_entropy_threads(2048) == 128);
  CHECK(cross_entropy_threads(2049) == 256);
  CHECK(cross_entropy_threads(50257) == 512);
  for (int64_t V : {int64_t{0}, int64_t{1}, int64_t{16384}, int64_t{16385}, int64_t{1} << 40}) {
    CHECK(cross_entropy_threads(V) % 32 == 0);
    CHECK(cross_entropy_threads(V) <= kCrossEntropyMaxThreads);
  }
  CHECK((kLossSumThreads & (kLossSumThreads - 1)) == 0);  // the loss tree halves it down to 1
}

TEST_CASE("dropout groups: every element once, each group inside one Philox block", "[launch_geometry]") {
  for (int64_t width : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{10}, int64_t{37},
                        int64_t{768}}) {
    for (uint64_t base : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{1001}, uint64_t{1} << 40}) {
      INFO("width " << width << ", base " << base);
      const int64_t lead = static_cast<int64_t>(base & 3);
      std::vector<int> seen(width, 0);
      const int64_t groups = dropout_groups_per_row(width);
      for (int64_t g = 0; g < groups; ++g) {
        const ElementRange r = dropout_group(lead, width, g);
        REQUIRE(r.begin >= 0);
        REQUIRE(r.end <= width);
        for (int64_t c = r.begin; c < r.end; ++c) {
          ++seen[c];
          CHECK((base + c) >> 2 == (base >> 2) + static_cast<uint64_t>(g));  // the block the thread evaluates
        }
      }
      for (int64_t c = 0; c < width; ++c) CHECK(seen[c] == 1);
      // A group past the row's last block is empty.
      const ElementRange past = dropout_group(lead, width, groups);
      CHECK(past.begin >= past.end);
    }
  }
  CHECK(dropout_groups_per_row(0) == 0);
  CHECK(dropout_groups_per_row(1) == 1);
  CHECK(dropout_groups_per_row(2) == 2);  // lead 3: elements in two blocks
  CHECK(dropout_groups_per_row(768) == 193);
}

TEST_CASE("step chunks and chunk_owner: each chunk belongs to the tensor whose range holds it", "[launch_geometry]") {
  CHECK(step_chunks(0) == 0);
  CHECK(step_chunks(1) == 1);
  CHECK(step_chunks(kStepChunk) == 1);
  CHECK(step_chunks(kStepChunk + 1) == 2);
  CHECK(kStepChunk % 4 == 0);  // chunk starts keep 16-byte alignment
  CHECK(kStepChunk % (4 * kStepThreads) == 0);
  const std::vector<int64_t> sizes = {1, kStepChunk, 3 * kStepChunk + 5, 768, 50257 * 768, 7};
  std::vector<int64_t> first, owner_of_chunk;
  int64_t total = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    first.push_back(total);
    for (int64_t c = 0; c < step_chunks(sizes[t]); ++c) owner_of_chunk.push_back(static_cast<int64_t>(t));
    total += step_chunks(sizes[t]);
  }
  const auto first_chunk = [&](int64_t k) { return first[k]; };
  for (int64_t c = 0; c < total; ++c) {
    INFO("chunk " << c);
    CHECK(chunk_owner(first_chunk, static_cast<int64_t>(first.size()), c) == owner_of_chunk[c]);
  }
  const std::vector<int64_t> one = {0};
  CHECK(chunk_owner([&](int64_t k) { return one[k]; }, 1, 5) == 0);
}

TEST_CASE("step_vectorizable: f32 buffers 16-byte aligned, the copy to four of its elements", "[launch_geometry]") {
  CHECK(step_vectorizable(256, 512, 1024, 2048, 0, 0));
  CHECK(step_vectorizable(256, 512, 0, 0, 0, 0));               // SGD without momentum
  CHECK_FALSE(step_vectorizable(260, 512, 1024, 2048, 0, 0));   // params 4 floats off
  CHECK_FALSE(step_vectorizable(256, 512, 1028, 2048, 0, 0));
  CHECK(step_vectorizable(256, 512, 1024, 2048, 8, 2));         // bf16 copy: 8 bytes
  CHECK_FALSE(step_vectorizable(256, 512, 1024, 2048, 12, 2));  // bf16 copy two elements off
  CHECK(step_vectorizable(256, 512, 1024, 2048, 4096, 4));
  CHECK_FALSE(step_vectorizable(256, 512, 1024, 2048, 4104, 4));  // f32 copy 2 floats off
}
