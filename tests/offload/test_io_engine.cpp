#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "core/error.h"
#include "offload/aio_options.h"
#include "offload/direct_file.h"
#include "offload/io_engine.h"
#include "offload/io_faults.h"
#include "tests/offload/offload_test_util.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::offload;
using namespace fathom::testing;

namespace {



// Resets the fault seam when a test leaves, also when it fails.
struct FaultScope {
  explicit FaultScope(const IoFaults& faults) { set_io_faults(faults); }
  ~FaultScope() { set_io_faults({}); }
};

// Docker's default seccomp profile blocks io_uring: the forced-io_uring cases then say so.
bool io_uring_available() {
  try {
    IoEngine probe({}, IoBackend::IoUring);
    return true;
  } catch (const Error& e) {
    WARN("io_uring is not available here, skipping its cases: " << e.message());
    return false;
  }
}

constexpr int64_t kBlock = 64 << 10;

}  // namespace

TEST_CASE("IoEngine round-trips random data on both backends", "[offload]") {
  const IoBackend backend = GENERATE(IoBackend::IoUring, IoBackend::Threads);
  if (backend == IoBackend::IoUring && !io_uring_available()) return;
  const int64_t queue_depth = GENERATE(1, 8);
  const int64_t threads = GENERATE(1, 3);
  const bool single_submit = GENERATE(false, true);
  const bool overlap_events = GENERATE(true, false);
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = kBlock,
                             .queue_depth = queue_depth,
                             .intra_op_parallelism = threads,
                             .single_submit = single_submit,
                             .overlap_events = overlap_events},
                  backend);
  CHECK(engine.backend() == backend);
  DirectFile file(dir.file("data.bin"));
  const int64_t align = file.alignment();
  // One block; many blocks; not a multiple of the block size but of the alignment.
  for (const int64_t bytes : {kBlock, 37 * kBlock, 5 * kBlock + 3 * align, align}) {
    for (const int64_t offset : {int64_t{0}, 7 * align}) {
      AlignedBuffer out(bytes), in(bytes);
      out.randomize(static_cast<uint64_t>(bytes + offset));
      IoTicket written = engine.write(file, offset, out.data(), bytes);
      CHECK(written.bytes() == bytes);
      written.wait();
      CHECK(written.done());
      IoTicket read = engine.read(file, offset, in.data(), bytes);
      read.wait();
      read.wait();  // twice is fine
      INFO("bytes " << bytes << " offset " << offset);
      CHECK(in.same(out, bytes));
    }
  }
}

TEST_CASE("IoEngine keeps several requests in flight at once", "[offload]") {
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = kBlock, .queue_depth = 4, .intra_op_parallelism = 2});
  DirectFile file(dir.file("many.bin"));
  std::vector<AlignedBuffer> out, in;
  std::vector<IoTicket> tickets;
  for (int i = 0; i < 6; ++i) {
    out.emplace_back(3 * kBlock);
    out.back().randomize(100 + i);
    tickets.push_back(engine.write(file, i * 3 * kBlock, out.back().data(), 3 * kBlock));
  }
  for (IoTicket& t : tickets) t.wait();
  tickets.clear();
  for (int i = 0; i < 6; ++i) {
    in.emplace_back(3 * kBlock);
    tickets.push_back(engine.read(file, i * 3 * kBlock, in.back().data(), 3 * kBlock));
  }
  for (int i = 0; i < 6; ++i) {
    tickets[i].wait();
    CHECK(in[i].same(out[i], 3 * kBlock));
  }
}

TEST_CASE("IoEngine refuses misaligned requests before any I/O", "[offload]") {
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = kBlock});
  DirectFile file(dir.file("aligned.bin"));
  const int64_t align = file.alignment();
  AlignedBuffer buffer(4 * align);
  const std::string address = error_of([&] { engine.write(file, 0, buffer.data() + align / 2, align); });
  CHECK_THAT(address, Catch::Contains("buffer address") && Catch::Contains("alignment " + std::to_string(align)) &&
                          Catch::Contains(file.path()));
  const std::string offset = error_of([&] { engine.write(file, 100, buffer.data(), align); });
  CHECK_THAT(offset, Catch::Contains("the offset 100 is not a multiple") && Catch::Contains(std::to_string(align)));
  const std::string size = error_of([&] { engine.read(file, 0, buffer.data(), align + 8); });
  CHECK_THAT(size, Catch::Contains("the size " + std::to_string(align + 8) + " is not a multiple"));
  CHECK(file.size() == 0);
  CHECK(engine.counters().requests == 0);
}

TEST_CASE("io_uring refused: Auto falls back to threads, an explicit io_uring throws", "[offload]") {
  FaultScope faults(IoFaults{.refuse_io_uring = true});
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = kBlock, .intra_op_parallelism = 2}, IoBackend::Auto);
  CHECK(engine.backend() == IoBackend::Threads);
  DirectFile file(dir.file("fallback.bin"));
  AlignedBuffer out(9 * kBlock), in(9 * kBlock);
  out.randomize(7);
  engine.write(file, 0, out.data(), out.bytes).wait();
  engine.read(file, 0, in.data(), in.bytes).wait();
  CHECK(in.same(out, out.bytes));
  CHECK_THAT(error_of([] { IoEngine explicit_uring({}, IoBackend::IoUring); }),
             Catch::Contains("io_uring") && Catch::Contains("FATHOM_AIO_BACKEND=threads"));
}

TEST_CASE("DirectFile errors name the path and the fix", "[offload]") {
  TempDir dir;
  SECTION("file system without O_DIRECT") {
    FaultScope faults(IoFaults{.refuse_direct_io = true});
    const std::string path = dir.file("no_direct.bin");
    CHECK_THAT(error_of([&] { DirectFile file(path); }),
               Catch::Contains(path) && Catch::Contains("O_DIRECT") && Catch::Contains("ext4"));
  }
  SECTION("missing directory") {
    const std::string path = dir.file("missing/swap.bin");
    CHECK_THAT(error_of([&] { DirectFile file(path); }), Catch::Contains(path) && Catch::Contains("does not exist"));
  }
  SECTION("unwritable directory") {
    if (::geteuid() == 0) {
      WARN("running as root, which ignores file permissions: skipping the unwritable-directory case");
      return;
    }
    const std::string locked = dir.file("locked");
    REQUIRE(::mkdir(locked.c_str(), 0500) == 0);
    const std::string path = locked + "/swap.bin";
    CHECK_THAT(error_of([&] { DirectFile file(path); }), Catch::Contains(path) && Catch::Contains("not writable"));
    ::chmod(locked.c_str(), 0700);
  }
}

TEST_CASE("DirectFile reports a power-of-two alignment and sizes", "[offload]") {
  TempDir dir;
  DirectFile file(dir.file("sizes.bin"));
  const int64_t align = file.alignment();
  CHECK(align >= 512);
  CHECK((align & (align - 1)) == 0);
  CHECK(file.size() == 0);
  file.truncate(3 * align);
  CHECK(file.size() == 3 * align);
  CHECK(DirectFile::round_up(1, 512) == 512);
  CHECK(DirectFile::round_up(1024, 512) == 1024);
  CHECK(DirectFile::round_up(0, 4096) == 0);
  DirectFile moved = std::move(file);
  CHECK(moved.size() == 3 * align);
}

TEST_CASE("a full disk fails the write's ticket, naming the file and bytes", "[offload]") {
  const IoBackend backend = GENERATE(IoBackend::IoUring, IoBackend::Threads);
  if (backend == IoBackend::IoUring && !io_uring_available()) return;
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = kBlock, .queue_depth = 2}, backend);
  DirectFile file(dir.file("full.bin"));
  AlignedBuffer out(4 * kBlock);
  FaultScope faults(IoFaults{.space_left = 2 * kBlock});
  IoTicket ticket = engine.write(file, 0, out.data(), out.bytes);
  const std::string message = error_of([&] { ticket.wait(); });
  CHECK_THAT(message, Catch::Contains("no space left on device writing " + std::to_string(kBlock) + " bytes") &&
                          Catch::Contains(file.path()) && Catch::Contains("point nvme_path elsewhere"));
  CHECK(ticket.done());
  CHECK(error_of([&] { ticket.wait(); }) == message);  // the error again, every time
  CHECK(io_faults().space_left == 0);
}

TEST_CASE("a read past the end of the file is a short read error", "[offload]") {
  const IoBackend backend = GENERATE(IoBackend::IoUring, IoBackend::Threads);
  if (backend == IoBackend::IoUring && !io_uring_available()) return;
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = kBlock}, backend);
  DirectFile file(dir.file("short.bin"));
  AlignedBuffer buffer(2 * kBlock);
  engine.write(file, 0, buffer.data(), kBlock).wait();
  CHECK_THAT(error_of([&] { engine.read(file, 0, buffer.data(), 2 * kBlock).wait(); }),
             Catch::Contains("read 0 of " + std::to_string(kBlock) + " bytes at offset " + std::to_string(kBlock)) &&
                 Catch::Contains("the file is shorter (truncated?)") && Catch::Contains(file.path()));
}

TEST_CASE("a short read is resubmitted, then reports how much of the piece it got", "[offload]") {
  const IoBackend backend = GENERATE(IoBackend::IoUring, IoBackend::Threads);
  if (backend == IoBackend::IoUring && !io_uring_available()) return;
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = kBlock}, backend);
  DirectFile file(dir.file("half.bin"));
  AlignedBuffer out(2 * kBlock), in(2 * kBlock);
  out.randomize(11);
  engine.write(file, 0, out.data(), kBlock + kBlock / 2).wait();
  CHECK_THAT(error_of([&] { engine.read(file, 0, in.data(), 2 * kBlock).wait(); }),
             Catch::Contains("read " + std::to_string(kBlock / 2) + " of " + std::to_string(kBlock) +
                             " bytes at offset " + std::to_string(kBlock)));
  CHECK(in.same(out, kBlock + kBlock / 2));  // what was there arrived
  CHECK(engine.counters().bytes_read == kBlock + kBlock / 2);
}

TEST_CASE("FATHOM_AIO_BACKEND overrides Auto and names itself when wrong", "[offload]") {
  const char* before = std::getenv("FATHOM_AIO_BACKEND");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("FATHOM_AIO_BACKEND", "threads", 1);
  const IoBackend chosen = IoEngine().backend();
  const IoBackend explicit_choice =
      io_uring_available() ? IoEngine({}, IoBackend::IoUring).backend() : IoBackend::IoUring;
  ::setenv("FATHOM_AIO_BACKEND", "libaio", 1);
  const std::string bad = error_of([] { IoEngine engine; });
  if (before != nullptr)
    ::setenv("FATHOM_AIO_BACKEND", saved.c_str(), 1);
  else
    ::unsetenv("FATHOM_AIO_BACKEND");
  CHECK(chosen == IoBackend::Threads);
  CHECK(explicit_choice == IoBackend::IoUring);  // an explicit choice is not overridden
  CHECK_THAT(bad, Catch::Contains("FATHOM_AIO_BACKEND='libaio'") && Catch::Contains("auto, io_uring or threads"));
}

TEST_CASE("IoEngine counts bytes, requests and waiting", "[offload]") {
  TempDir dir;
  IoEngine engine(AioOptions{.block_size = kBlock, .intra_op_parallelism = 2});
  DirectFile file(dir.file("count.bin"));
  AlignedBuffer buffer(5 * kBlock);
  engine.write(file, 0, buffer.data(), 5 * kBlock).wait();
  engine.read(file, kBlock, buffer.data(), 2 * kBlock).wait();
  IoEngine::Counters c = engine.counters();
  CHECK(c.bytes_written == 5 * kBlock);
  CHECK(c.bytes_read == 2 * kBlock);
  CHECK(c.requests == 2);
  CHECK(c.wait_seconds >= 0);
  engine.reset_counters();
  c = engine.counters();
  CHECK((c.bytes_written == 0 && c.bytes_read == 0 && c.requests == 0 && c.wait_seconds == 0));
}

TEST_CASE("tickets: unwaited ones are drained by the engine, default ones are done", "[offload]") {
  TempDir dir;
  AlignedBuffer buffer(16 * kBlock);
  buffer.randomize(3);
  IoTicket survivor;
  CHECK(survivor.done());
  CHECK(survivor.bytes() == 0);
  survivor.wait();
  {
    IoEngine engine(AioOptions{.block_size = kBlock, .queue_depth = 2});
    DirectFile file(dir.file("drain.bin"));
    for (int i = 0; i < 4; ++i) engine.write(file, 0, buffer.data(), buffer.bytes);  // dropped unwaited
    survivor = engine.write(file, 0, buffer.data(), buffer.bytes);
  }  // the engine finishes everything before it goes
  CHECK(survivor.done());
  survivor.wait();
  AlignedBuffer in(16 * kBlock);
  IoEngine engine;
  DirectFile file(dir.file("drain.bin"));
  engine.read(file, 0, in.data(), in.bytes).wait();
  CHECK(in.same(buffer, buffer.bytes));
}

TEST_CASE("backend names and fault lists parse; bad text names the accepted form", "[offload]") {
  CHECK(parse_io_backend("auto") == IoBackend::Auto);
  CHECK(parse_io_backend("io_uring") == IoBackend::IoUring);
  CHECK(parse_io_backend("threads") == IoBackend::Threads);
  CHECK(std::string(io_backend_name(IoBackend::IoUring)) == "io_uring");
  CHECK_THAT(error_of([] { parse_io_backend("libaio"); }),
             Catch::Contains("'libaio'") && Catch::Contains("auto, io_uring or threads"));

  const IoFaults f = parse_io_faults("odirect, io_uring,enospc=1048576");
  CHECK((f.refuse_direct_io && f.refuse_io_uring && f.space_left == 1048576));
  const IoFaults none = parse_io_faults("");
  CHECK((!none.refuse_direct_io && !none.refuse_io_uring && none.space_left == -1));
  CHECK_THAT(error_of([] { parse_io_faults("odirect,disk_full"); }),
             Catch::Contains("'disk_full'") && Catch::Contains("enospc=BYTES"));
  CHECK_THAT(error_of([] { parse_io_faults("enospc=lots"); }), Catch::Contains("enospc=BYTES"));
}

TEST_CASE("IoEngine refuses out-of-range options", "[offload]") {
  CHECK_THAT(error_of([] { IoEngine e(AioOptions{.queue_depth = 0}); }), Catch::Contains("aio.queue_depth 0"));
  CHECK_THAT(error_of([] { IoEngine e(AioOptions{.block_size = -1}); }), Catch::Contains("aio.block_size -1"));
  CHECK_THAT(error_of([] { IoEngine e(AioOptions{.intra_op_parallelism = 0}); }),
             Catch::Contains("aio.intra_op_parallelism 0"));
}
