// The bucket plan shared by stage-0 data parallelism and ZeRO 2-3: reverse packing, size and
// kind breaks, in-order launches whatever order gradients become ready in.
#include <catch2/catch.hpp>

#include "parallel/gradient_buckets.h"
#include "test_util.h"

using fathom::parallel::GradientBuckets;
using fathom::testing::error_of;

TEST_CASE("gradient buckets pack items in reverse, at most the capacity, one large item alone", "[parallel]") {
  const GradientBuckets plan({3, 5, 2, 9}, 8);
  REQUIRE(plan.size() == 3);
  CHECK(plan.members(0) == std::vector<size_t>{3});  // 9 > 8: a bucket of its own
  CHECK(plan.members(1) == std::vector<size_t>{2, 1});
  CHECK(plan.members(2) == std::vector<size_t>{0});
  CHECK(plan.elements(1) == 7);
  CHECK(plan.bucket_of(1) == 1);
  CHECK(plan.offset_in_bucket(2) == 0);
  CHECK(plan.offset_in_bucket(1) == 2);  // after item 2 in fill order

  const GradientBuckets by_kind({4, 4, 4, 4}, 100, {0, 0, 1, 1});  // a dtype change closes a bucket
  REQUIRE(by_kind.size() == 2);
  CHECK(by_kind.members(0) == std::vector<size_t>{3, 2});
  CHECK(by_kind.members(1) == std::vector<size_t>{1, 0});

  CHECK(error_of([] { GradientBuckets({1}, 0); }) ==
        "gradient buckets: the bucket size must be > 0 elements, got 0 (zero_optimization.reduce_bucket_size)");
}

TEST_CASE("gradient buckets launch strictly in index order once every member is ready", "[parallel]") {
  GradientBuckets plan({3, 5, 2, 9}, 8);
  for (int backward = 0; backward < 2; ++backward) {
    plan.reset();
    CHECK(plan.mark_ready(1));
    CHECK_FALSE(plan.next_launchable());  // bucket 0 (item 3) is not ready: nothing may start
    CHECK(plan.mark_ready(0));
    CHECK_FALSE(plan.next_launchable());
    CHECK(plan.mark_ready(3));
    CHECK(plan.next_launchable() == std::optional<size_t>(0));
    CHECK_FALSE(plan.next_launchable());  // bucket 1 still waits for item 2
    CHECK_FALSE(plan.mark_ready(1));      // marking twice changes nothing
    CHECK(plan.mark_ready(2));
    CHECK(plan.next_launchable() == std::optional<size_t>(1));
    CHECK(plan.next_launchable() == std::optional<size_t>(2));  // item 0 was ready already
    CHECK_FALSE(plan.next_launchable());
    CHECK(plan.launched() == 3);
  }
}
