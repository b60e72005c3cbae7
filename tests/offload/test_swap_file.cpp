#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "offload/direct_file.h"
#include "offload/io_engine.h"
#include "offload/io_faults.h"
#include "tests/offload/offload_test_util.h"
#include "test_util.h"
#include "offload/swap_file.h"

using namespace fathom;
using namespace fathom::offload;
using namespace fathom::testing;

namespace {



std::vector<AlignedBuffer> blocks(const std::vector<int64_t>& sizes, uint64_t seed) {
  std::vector<AlignedBuffer> out;
  for (const int64_t n : sizes) {
    out.emplace_back(n);
    out.back().randomize(seed++);
  }
  return out;
}

std::vector<SwapSpan> spans(const std::vector<AlignedBuffer>& blocks) {
  std::vector<SwapSpan> out;
  for (const AlignedBuffer& b : blocks) out.push_back(b.span());
  return out;
}

// Damage the file the way something outside Fathom would: a plain buffered write.
void scribble(const std::string& path, int64_t offset) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const char garbage[3] = {'\x5a', '\xa5', '\x00'};
  const bool wrote = ::pwrite(fd, garbage, sizeof garbage, offset) == static_cast<ssize_t>(sizeof garbage);
  ::close(fd);
  REQUIRE(wrote);
}

const std::vector<int64_t> kSizes = {3 * 4096 + 100, 1, 0, 1 << 20, 4096};

std::string read_back(SwapFile& file, std::vector<AlignedBuffer>& in) {
  return error_of([&] {
    file.begin_read(spans(in));
    file.finish_read();
  });
}

}  // namespace

TEST_CASE("SwapFile round-trips several spans, write after write", "[offload]") {
  const IoBackend backend = GENERATE(IoBackend::Auto, IoBackend::Threads);
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = 256 << 10, .queue_depth = 4, .intra_op_parallelism = 2}, backend);
  SwapFile file(engine, dir.file("group0.swp"));
  CHECK_FALSE(file.has_state());
  CHECK(file.path() == dir.file("group0.swp"));
  for (uint64_t round = 0; round < 3; ++round) {
    std::vector<AlignedBuffer> out = blocks(kSizes, 10 * round), in = blocks(kSizes, 999);
    file.begin_write(spans(out));
    CHECK_FALSE(file.has_state());
    file.finish_write();
    CHECK(file.has_state());
    int64_t expected = file.alignment();
    for (const int64_t n : kSizes) expected += DirectFile::round_up(n, file.alignment());
    CHECK(file.file_bytes() == expected);
    file.begin_read(spans(in));
    file.finish_read();
    for (size_t i = 0; i < out.size(); ++i) {
      INFO("round " << round << " span " << i);
      CHECK(in[i].same(out[i]));
    }
  }
}

TEST_CASE("SwapFile detects damage, truncation, stale headers and missing state", "[offload]") {
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = 128 << 10});
  const std::string path = dir.file("group1.swp");
  SwapFile file(engine, path);
  std::vector<AlignedBuffer> out = blocks(kSizes, 1), in = blocks(kSizes, 2);
  const int64_t span0 = file.alignment();  // the header fits in the first block
  const std::string corrupt = "swap file '" + path + "' is corrupt or truncated (";
  const std::string fix =
      "): it was changed outside Fathom or a write was interrupted; restart from the last checkpoint";

  SECTION("reading a file never written") {
    CHECK_THAT(read_back(file, in), Catch::Contains(path) && Catch::Contains("holds no state"));
  }
  file.begin_write(spans(out));
  file.finish_write();
  REQUIRE(read_back(file, in) == "(no error)");

  SECTION("a changed byte in a span") {
    scribble(path, span0 + 17);
    CHECK_THAT(read_back(file, in), Catch::Contains(corrupt) && Catch::Contains(fix) && Catch::Contains("span 0's"));
  }
  SECTION("a changed byte in the last span") {
    scribble(path, file.file_bytes() - 4096);
    CHECK_THAT(read_back(file, in), Catch::Contains(corrupt) && Catch::Contains(fix) && Catch::Contains("span 4's"));
  }
  SECTION("a changed byte in the header") {
    scribble(path, 60);
    CHECK_THAT(read_back(file, in),
               Catch::Contains(corrupt) && Catch::Contains(fix) && Catch::Contains("header's checksum"));
  }
  SECTION("a truncated file") {
    DirectFile raw(path);
    raw.truncate(file.file_bytes() - 4096);
    CHECK_THAT(read_back(file, in), Catch::Contains(corrupt) && Catch::Contains(fix) &&
                                        Catch::Contains("need " + std::to_string(file.file_bytes())));
  }
  SECTION("new data under the old header (the header write never happened)") {
    DirectFile raw(path);
    AlignedBuffer fresh(DirectFile::round_up(kSizes[0], file.alignment()));
    fresh.randomize(77);
    engine.write(raw, span0, fresh.memory.get(), fresh.bytes).wait();
    CHECK_THAT(read_back(file, in), Catch::Contains(corrupt) && Catch::Contains(fix) && Catch::Contains("span 0's"));
  }
  SECTION("other sizes than were written") {
    std::vector<int64_t> sizes = kSizes;
    sizes[1] = 2;
    std::vector<AlignedBuffer> other = blocks(sizes, 3);
    CHECK_THAT(read_back(file, other), Catch::Contains(corrupt) && Catch::Contains(fix) &&
                                           Catch::Contains("span 1 holds 1 bytes, 2 were asked for"));
    sizes.pop_back();
    std::vector<AlignedBuffer> fewer = blocks(sizes, 3);
    CHECK_THAT(read_back(file, fewer), Catch::Contains(corrupt) && Catch::Contains(fix) &&
                                           Catch::Contains("records 5 spans, 4 were asked for"));
  }
  SECTION("a failed write leaves no readable state, not the previous one") {
    std::vector<AlignedBuffer> next = blocks(kSizes, 5);
    set_io_faults(IoFaults{.space_left = 4096});
    file.begin_write(spans(next));
    const std::string failed = error_of([&] { file.finish_write(); });
    set_io_faults({});
    CHECK_THAT(failed, Catch::Contains("no space left on device") && Catch::Contains(path));
    CHECK_FALSE(file.has_state());
    CHECK_THAT(read_back(file, in), Catch::Contains("holds no state"));
    // A later complete write is readable again.
    file.begin_write(spans(next));
    file.finish_write();
    REQUIRE(read_back(file, in) == "(no error)");
    for (size_t i = 0; i < next.size(); ++i) CHECK(in[i].same(next[i]));
  }
}

TEST_CASE("SwapFile refuses spans direct I/O cannot move, and out-of-order calls", "[offload]") {
  TempDir dir;
  IoEngine engine;
  SwapFile file(engine, dir.file("group2.swp"));
  AlignedBuffer block(5000);
  const SwapSpan misaligned{block.memory.get() + 8, 100, block.capacity - 8};
  CHECK_THAT(error_of([&] { file.begin_write({misaligned}); }),
             Catch::Contains("span 0's buffer") && Catch::Contains("not aligned"));
  const SwapSpan short_capacity{block.memory.get(), 5000, 5000};
  CHECK_THAT(error_of([&] {
               file.begin_write({block.span(), short_capacity});
             }),
             Catch::Contains("span 1 has 5000 bytes in a 5000-byte block"));
  CHECK_THAT(error_of([&] { file.finish_write(); }), Catch::Contains("finish_write without a begin_write"));
  file.begin_write({block.span()});
  CHECK_THAT(error_of([&] { file.begin_read({block.span()}); }), Catch::Contains("call finish_write first"));
  file.finish_write();
  CHECK(file.has_state());
}

TEST_CASE("SwapFile drains a write it was never asked to finish", "[offload]") {
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = 64 << 10});
  std::vector<AlignedBuffer> out = blocks({1 << 20, 1 << 20}, 9);
  {
    SwapFile file(engine, dir.file("group3.swp"));
    file.begin_write(spans(out));
    SwapFile moved(std::move(file));
  }  // both destructors run with the write in flight
  CHECK(engine.counters().bytes_written == 2 << 20);
}
