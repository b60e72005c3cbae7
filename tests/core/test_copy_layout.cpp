// The host side of device copies: dim merging into a CopyLayout, and the copy grid size.
#include <catch2/catch.hpp>

#include <vector>

#include "core/cuda/copy_layout.h"
#include "test_util.h"

using namespace fathom;
using cuda::CopyLayout;
using cuda::make_copy_layout;

namespace {
std::vector<int64_t> sizes_of(const CopyLayout& l) { return {l.sizes, l.sizes + l.ndim}; }
std::vector<int64_t> dst_of(const CopyLayout& l) { return {l.dst_strides, l.dst_strides + l.ndim}; }
std::vector<int64_t> src_of(const CopyLayout& l) { return {l.src_strides, l.src_strides + l.ndim}; }
}  // namespace

TEST_CASE("copy layout: contiguous operands become one dim", "[core]") {
  const CopyLayout l = make_copy_layout({4, 5, 6}, {30, 6, 1}, {30, 6, 1});
  CHECK(l.numel == 120);
  CHECK(sizes_of(l) == std::vector<int64_t>{120});
  CHECK(dst_of(l) == std::vector<int64_t>{1});
  CHECK(src_of(l) == std::vector<int64_t>{1});
}

TEST_CASE("copy layout: a transposed source keeps two dims, size-1 dims vanish", "[core]") {
  // dst [3, 1, 4] contiguous, src the transpose of a contiguous [4, 3].
  const CopyLayout l = make_copy_layout({3, 1, 4}, {4, 4, 1}, {1, 99, 3});
  CHECK(l.numel == 12);
  CHECK(sizes_of(l) == std::vector<int64_t>{3, 4});
  CHECK(dst_of(l) == std::vector<int64_t>{4, 1});
  CHECK(src_of(l) == std::vector<int64_t>{1, 3});
}

TEST_CASE("copy layout: broadcast dims merge when both operands allow it", "[core]") {
  // src [5] broadcast to [2, 3, 5]: the outer two dims merge (src stride 0 on both).
  const CopyLayout l = make_copy_layout({2, 3, 5}, {15, 5, 1}, {0, 0, 1});
  CHECK(sizes_of(l) == std::vector<int64_t>{6, 5});
  CHECK(dst_of(l) == std::vector<int64_t>{5, 1});
  CHECK(src_of(l) == std::vector<int64_t>{0, 1});
  // A scalar filling every other column of [4, 8]: one run of 16 with stride 2.
  const CopyLayout every_other = make_copy_layout({4, 4}, {8, 2}, {0, 0});
  CHECK(sizes_of(every_other) == std::vector<int64_t>{16});
  CHECK(dst_of(every_other) == std::vector<int64_t>{2});
  // Columns 1, 3, 5 only: the rows do not continue where the previous row's run ended.
  const CopyLayout fill = make_copy_layout({4, 3}, {8, 2}, {0, 0});
  CHECK(sizes_of(fill) == std::vector<int64_t>{4, 3});
  CHECK(dst_of(fill) == std::vector<int64_t>{8, 2});
  CHECK(src_of(fill) == std::vector<int64_t>{0, 0});
  // A single element, and an all-ones shape.
  const CopyLayout one = make_copy_layout({}, {}, {});
  CHECK(one.ndim == 0);
  CHECK(one.numel == 1);
  CHECK(make_copy_layout({1, 1}, {5, 7}, {0, 0}).ndim == 0);
  CHECK(make_copy_layout({3, 0}, {1, 1}, {1, 1}).numel == 0);
}

TEST_CASE("copy layout: more unmergeable dims than the kernel takes is a clear error", "[core]") {
  Shape sizes(cuda::kMaxCopyDims + 1, 2);
  Strides dst = contiguous_strides(sizes), src(sizes.size());
  for (size_t d = 0; d < src.size(); ++d) src[d] = dst[src.size() - 1 - d];  // reversed: nothing merges
  CHECK_NOTHROW(make_copy_layout(Shape(sizes.begin() + 1, sizes.end()), Strides(dst.begin() + 1, dst.end()),
                                 Strides(src.begin() + 1, src.end())));
  CHECK_THAT(testing::error_of([&] { make_copy_layout(sizes, dst, src); }),
             Catch::Contains("has more than 16 dims that cannot be merged; make a tensor contiguous() first"));
}

TEST_CASE("copy grid: covers every element once per pass, capped, never empty", "[core]") {
  using cuda::copy_grid_blocks;
  using cuda::kCopyThreads;
  STATIC_REQUIRE(copy_grid_blocks(0) == 1);
  STATIC_REQUIRE(copy_grid_blocks(1) == 1);
  STATIC_REQUIRE(copy_grid_blocks(kCopyThreads) == 1);
  STATIC_REQUIRE(copy_grid_blocks(kCopyThreads + 1) == 2);
  STATIC_REQUIRE(copy_grid_blocks(int64_t{1} << 40) == 65535 * 16);  // the grid-stride loop does the rest
  for (int64_t n : {int64_t{1000003}, (int64_t{1} << 31) + 5})
    CHECK(int64_t{copy_grid_blocks(n)} * kCopyThreads >= std::min<int64_t>(n, int64_t{65535} * 16 * kCopyThreads));
}
