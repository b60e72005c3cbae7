// The gradient shard's two kinds against each other: a swapped gradient (one swap file per
// sub-group) must give what the resident one gives — accumulation over micro-steps, the norm
// bit for bit (fixed blocks, some inside a sub-group, some straddling two or more), the overflow
// flag, scaling before and after the norm, ties' writes, stage 1's whole assignment — while
// holding a bounded part of the shard in memory.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <random>

#include "core/error.h"
#include "tests/offload/offload_test_util.h"
#include "zero/gradient_shard.h"
#include "zero/swapped_gradients.h"

namespace fathom::zero {
namespace {

constexpr int64_t kNumel = 1000, kGroup = 130, kBlock = 64;

std::vector<Range> sub_groups() {
  std::vector<Range> groups;
  for (int64_t begin = 0; begin < kNumel; begin += kGroup) groups.push_back({begin, std::min(kNumel, begin + kGroup)});
  return groups;
}

Tensor random_values(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = normal(rng);
  return Tensor::from_vector(values, {n});
}

// One backward's parts, in descending shard order, of random sizes (as buckets complete).
void backward(std::vector<GradientShard*> shards, bool boundary, std::mt19937& rng) {
  for (GradientShard* shard : shards) shard->begin_backward(boundary);
  std::uniform_int_distribution<int64_t> size(1, 300);
  for (int64_t end = kNumel; end > 0;) {
    const int64_t begin = std::max<int64_t>(0, end - size(rng));
    const Tensor part = random_values(end - begin, rng);
    for (GradientShard* shard : shards) shard->add(part, begin);
    end = begin;
  }
  for (GradientShard* shard : shards) shard->end_backward(boundary);
}

void require_same_values(GradientShard& expected, GradientShard& actual) {
  for (const Range& group : sub_groups()) {
    INFO("sub-group [" << group.begin << ", " << group.end << ")");
    REQUIRE(actual.read(group).to_vector<float>() == expected.read(group).to_vector<float>());
    actual.done_with(group);
  }
}

SwappedGradients::Options options_in(const testing::TempDir& dir) {
  return {.directory = dir.path + "/gradient", .pin_memory = false, .norm_block = kBlock};
}

}  // namespace

TEST_CASE("norm pieces: counted ranges cut at every block boundary", "[zero][offload]") {
  const std::vector<Range> pieces = norm_pieces({{0, 10}, {12, 30}, {30, 31}}, 8);
  const std::vector<std::pair<int64_t, int64_t>> expected{{0, 8}, {8, 10}, {12, 16}, {16, 24}, {24, 30}, {30, 31}};
  REQUIRE(pieces.size() == expected.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    CHECK(pieces[i].begin == expected[i].first);
    CHECK(pieces[i].end == expected[i].second);
  }
}

TEST_CASE("a swapped gradient gives the resident one's values, norm and overflow bit for bit", "[zero][offload]") {
  for (const DType accumulated : {DType::F32, DType::BF16})
    for (const bool holes : {false, true}) {
      INFO(dtype_name(accumulated) << (holes ? ", some parts not counted" : ", every part counted"));
      const std::vector<Range> counted =
          holes ? std::vector<Range>{{10, 300}, {420, 999}} : std::vector<Range>{{0, kNumel}};
      const testing::TempDir dir("gradient");
      ResidentGradient resident(kNumel, accumulated, true, GradientPlacement{}, counted, kBlock);
      SwappedGradients swapped(sub_groups(), accumulated, counted, options_in(dir));
      std::mt19937 rng(5);
      for (int cycle = 0; cycle < 2; ++cycle) {
        backward({&resident, &swapped}, false, rng);  // accumulation 2: read back, added, written again
        CHECK_FALSE(swapped.complete());
        backward({&resident, &swapped}, true, rng);
        REQUIRE(swapped.complete());
        CHECK(swapped.has_inf_or_nan() == resident.has_inf_or_nan());
        CHECK(swapped.norm() == resident.norm());
        // fp16's order: unscale, then the norm (read again), then clipping; a pipeline tie's write.
        resident.scale(1.0 / 1024);
        swapped.scale(1.0 / 1024);
        CHECK(swapped.norm() == resident.norm());
        resident.scale(0.37);
        swapped.scale(0.37);
        const Tensor tie = random_values(350, rng);
        resident.write({50, 400}, tie);
        swapped.write({50, 400}, tie);
        CHECK(swapped.read({120, 270}).to_vector<float>() == resident.read({120, 270}).to_vector<float>());
        CHECK(swapped.norm() == resident.norm());
        require_same_values(resident, swapped);
        resident.zero();
        swapped.zero();
      }
      // At most the sub-group added into, one straddled into below it, one being written, and a
      // norm block being assembled.
      CHECK(swapped.peak_resident_elements() <= 3 * kGroup + kBlock);
      const auto io = swapped.io_counters();
      REQUIRE(io.has_value());
      CHECK(io->bytes_written > 0);
      CHECK(io->bytes_read > 0);
    }
}

TEST_CASE("a swapped gradient reports inf and NaN, and takes stage 1's reduced shard whole", "[zero][offload]") {
  const testing::TempDir dir("gradient");
  const std::vector<Range> counted{{0, kNumel}};
  ResidentGradient resident(kNumel, DType::F32, false, GradientPlacement{}, counted, kBlock);
  SwappedGradients swapped(sub_groups(), DType::F32, counted, options_in(dir));
  std::mt19937 rng(9);
  Tensor reduced = random_values(kNumel, rng);
  resident.assign(reduced.clone());
  swapped.assign(reduced.clone());
  resident.end_backward(true);
  swapped.end_backward(true);
  CHECK_FALSE(swapped.has_inf_or_nan());
  CHECK(swapped.norm() == resident.norm());
  require_same_values(resident, swapped);
  resident.zero();
  swapped.zero();

  reduced.narrow(0, 777, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  resident.assign(reduced.clone());
  swapped.assign(reduced.clone());
  resident.end_backward(true);
  swapped.end_backward(true);
  CHECK(resident.has_inf_or_nan());
  CHECK(swapped.has_inf_or_nan());
}

TEST_CASE("a swapped gradient refuses parts out of order and detects a damaged file", "[zero][offload]") {
  const testing::TempDir dir("gradient");
  // Sub-groups of 8000 bytes, so that a byte 4106 bytes into the file is data at any alignment.
  SwappedGradients swapped({{0, 2000}, {2000, 4000}}, DType::F32, {{0, 4000}}, options_in(dir));
  std::mt19937 rng(3);
  swapped.begin_backward(true);
  swapped.add(random_values(1500, rng), 2500);
  swapped.add(random_values(1000, rng), 1500);
  CHECK_THROWS_WITH(swapped.add(random_values(100, rng), 2600),
                    Catch::Contains("descending shard order") && Catch::Contains("sub-group 1"));
  swapped.add(random_values(1500, rng), 0);
  swapped.end_backward(true);
  REQUIRE(swapped.complete());

  // Damage the first sub-group's file between the boundary and the step.
  const std::string victim = dir.path + "/gradient/group0.swp";
  REQUIRE(std::filesystem::exists(victim));
  const int fd = ::open(victim.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  const char garbage = 0x5a;
  REQUIRE(::pwrite(fd, &garbage, 1, 4096 + 10) == 1);
  ::close(fd);
  CHECK_THROWS_WITH(swapped.read({0, 2000}), Catch::Contains("corrupt") && Catch::Contains("group0.swp"));
  CHECK_NOTHROW(swapped.read({2000, 4000}));
}

}  // namespace fathom::zero
