#include "offload/swap_file.h"

#include <cstring>
#include <exception>
#include <utility>

#include "core/error.h"
#include "core/xxhash64.h"

namespace fathom::offload {
namespace {

constexpr char kMagic[8] = {'F', 'T', 'H', 'M', 'S', 'W', 'A', 'P'};
constexpr uint32_t kFormatVersion = 1;

// The header's fixed part, then one SpanRecord per span. Host byte order: a swap file is
// scratch for the process that wrote it, never moved between machines.
struct HeaderPrefix {
  char magic[8];
  uint32_t version;
  uint32_t span_count;
  uint64_t generation;
  uint64_t alignment;
  uint64_t checksum;  // xxhash64 of the prefix and records, with this field zero
};
struct SpanRecord {
  uint64_t bytes;
  uint64_t checksum;
};
static_assert(sizeof(HeaderPrefix) == 40 && sizeof(SpanRecord) == 16);

int64_t header_used_bytes(size_t spans) {
  return static_cast<int64_t>(sizeof(HeaderPrefix) + spans * sizeof(SpanRecord));
}

uint64_t header_checksum(unsigned char* header, size_t spans) {
  HeaderPrefix prefix;
  std::memcpy(&prefix, header, sizeof prefix);
  const uint64_t stored = prefix.checksum;
  prefix.checksum = 0;
  std::memcpy(header, &prefix, sizeof prefix);
  const uint64_t sum = xxhash64(header, static_cast<size_t>(header_used_bytes(spans)));
  prefix.checksum = stored;
  std::memcpy(header, &prefix, sizeof prefix);
  return sum;
}

}  // namespace

SwapFile::SwapFile(IoEngine& engine, std::string path) : engine_(&engine), file_(std::move(path)) {}

SwapFile::SwapFile(SwapFile&&) noexcept = default;

SwapFile::~SwapFile() {
  for (IoTicket& ticket : tickets_) {
    try {
      ticket.wait();
    } catch (const Error&) {
      // The owner is unwinding or abandoning this state; the error changes nothing now.
    }
  }
}

void SwapFile::corrupt(const std::string& what) const {
  FATHOM_FAIL("swap file '", path(), "' is corrupt or truncated (", what,
              "): it was changed outside Fathom or a write was interrupted; restart from the last checkpoint");
}

void SwapFile::plan(const std::vector<SwapSpan>& spans, const char* op) {
  const int64_t align = alignment();
  header_bytes_ = DirectFile::round_up(header_used_bytes(spans.size()), align);
  offsets_.clear();
  int64_t offset = header_bytes_;
  for (size_t i = 0; i < spans.size(); ++i) {
    const SwapSpan& s = spans[i];
    const int64_t padded = DirectFile::round_up(s.bytes, align);
    FATHOM_CHECK(s.bytes >= 0, "SwapFile::", op, " of '", path(), "': span ", i, " has ", s.bytes,
                 " bytes; a span's size must be >= 0");
    FATHOM_CHECK(s.bytes == 0 || reinterpret_cast<uintptr_t>(s.data) % static_cast<uintptr_t>(align) == 0,
                 "SwapFile::", op, " of '", path(), "': span ", i, "'s buffer ", s.data,
                 " is not aligned to the file's direct-I/O alignment ", align,
                 "; swap only page-aligned host-tier blocks (offload/host_memory.h)");
    FATHOM_CHECK(s.capacity >= padded, "SwapFile::", op, " of '", path(), "': span ", i, " has ", s.bytes,
                 " bytes in a ", s.capacity, "-byte block, but direct I/O moves whole ", align, "-byte units, ", padded,
                 " bytes; pad the block to a multiple of ", align);
    offsets_.push_back(offset);
    offset += padded;
  }
  file_bytes_ = offset;
}

unsigned char* SwapFile::header_buffer(int64_t bytes) {
  if (bytes > header_capacity_) {
    auto* block =
        static_cast<unsigned char*>(std::aligned_alloc(static_cast<size_t>(alignment()), static_cast<size_t>(bytes)));
    FATHOM_CHECK(block != nullptr, "SwapFile '", path(), "': cannot allocate a ", bytes, "-byte header buffer");
    header_.reset(block);
    header_capacity_ = bytes;
  }
  std::memset(header_.get(), 0, static_cast<size_t>(bytes));
  return header_.get();
}

void SwapFile::wait_all() {
  std::vector<IoTicket> tickets = std::move(tickets_);
  tickets_.clear();
  pending_ = Pending::None;
  // Every ticket is waited before the first error is rethrown: no transfer may outlive the call.
  std::exception_ptr first;
  for (IoTicket& ticket : tickets) {
    try {
      ticket.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void SwapFile::begin_write(const std::vector<SwapSpan>& spans) {
  FATHOM_CHECK(pending_ == Pending::None, "SwapFile '", path(), "': begin_write while a ",
               pending_ == Pending::Write ? "write" : "read", " is in flight; call finish_",
               pending_ == Pending::Write ? "write" : "read", " first");
  plan(spans, "write");
  // Checksums before submission: the bytes must not change once the writes are queued, and
  // summing them now means what the header records is what was handed to the disk.
  checksums_.clear();
  for (const SwapSpan& s : spans) checksums_.push_back(xxhash64(s.data, static_cast<size_t>(s.bytes)));
  has_state_ = false;  // from the first byte written, the old state is gone
  spans_ = spans;
  pending_ = Pending::Write;
  try {
    for (size_t i = 0; i < spans.size(); ++i)
      if (spans[i].bytes > 0)
        tickets_.push_back(
            engine_->write(file_, offsets_[i], spans[i].data, DirectFile::round_up(spans[i].bytes, alignment())));
  } catch (...) {
    try {
      wait_all();
    } catch (...) {
    }
    throw;
  }
}

void SwapFile::finish_write() {
  FATHOM_CHECK(pending_ == Pending::Write, "SwapFile '", path(), "': finish_write without a begin_write");
  wait_all();
  // Only now the header: if the process dies before this point, the old header (or none) is
  // left, and its checksums do not match the new data. No fdatasync between the two: a swap file
  // need not survive a crash of the machine, only be recognized as invalid within the run.
  const uint64_t generation = generation_ + 1;
  unsigned char* header = header_buffer(header_bytes_);
  HeaderPrefix prefix{};
  std::memcpy(prefix.magic, kMagic, sizeof kMagic);
  prefix.version = kFormatVersion;
  prefix.span_count = static_cast<uint32_t>(spans_.size());
  prefix.generation = generation;
  prefix.alignment = static_cast<uint64_t>(alignment());
  std::memcpy(header, &prefix, sizeof prefix);
  for (size_t i = 0; i < spans_.size(); ++i) {
    const SpanRecord record{static_cast<uint64_t>(spans_[i].bytes), checksums_[i]};
    std::memcpy(header + sizeof prefix + i * sizeof record, &record, sizeof record);
  }
  prefix.checksum = header_checksum(header, spans_.size());
  std::memcpy(header, &prefix, sizeof prefix);
  spans_.clear();
  engine_->write(file_, 0, header, header_bytes_).wait();
  generation_ = generation;
  has_state_ = true;
}

void SwapFile::begin_read(const std::vector<SwapSpan>& spans) {
  FATHOM_CHECK(pending_ == Pending::None, "SwapFile '", path(), "': begin_read while a ",
               pending_ == Pending::Write ? "write" : "read", " is in flight; call finish_",
               pending_ == Pending::Write ? "write" : "read", " first");
  // A failed or unfinished write may have left the previous state's header and data intact:
  // valid-looking, but not what the caller last wrote.
  FATHOM_CHECK(has_state_, "swap file '", path(), "' holds no state to read: no write of it finished in this ",
               "process (never written, or the last write failed or was not finished); restart from the last ",
               "checkpoint");
  plan(spans, "read");
  const int64_t size = file_.size();
  if (size < file_bytes_)
    corrupt(
        ::fathom::detail::concat("it is ", size, " bytes; its header and ", spans.size(), " spans need ", file_bytes_));
  spans_ = spans;
  pending_ = Pending::Read;
  try {
    tickets_.push_back(engine_->read(file_, 0, header_buffer(header_bytes_), header_bytes_));
    for (size_t i = 0; i < spans.size(); ++i)
      if (spans[i].bytes > 0)
        tickets_.push_back(
            engine_->read(file_, offsets_[i], spans[i].data, DirectFile::round_up(spans[i].bytes, alignment())));
  } catch (...) {
    try {
      wait_all();
    } catch (...) {
    }
    throw;
  }
}

void SwapFile::finish_read() {
  FATHOM_CHECK(pending_ == Pending::Read, "SwapFile '", path(), "': finish_read without a begin_read");
  const std::vector<SwapSpan> spans = std::move(spans_);
  spans_.clear();
  wait_all();
  using ::fathom::detail::concat;
  unsigned char* header = header_.get();
  HeaderPrefix prefix;
  std::memcpy(&prefix, header, sizeof prefix);
  if (std::memcmp(prefix.magic, kMagic, sizeof kMagic) != 0) corrupt("no FTHMSWAP header at its start");
  if (prefix.version != kFormatVersion)
    corrupt(concat("format version ", prefix.version, ", this build reads ", kFormatVersion));
  if (prefix.span_count != spans.size())
    corrupt(concat("its header records ", prefix.span_count, " spans, ", spans.size(), " were asked for"));
  if (header_checksum(header, spans.size()) != prefix.checksum) corrupt("the header's checksum does not match");
  if (prefix.alignment != static_cast<uint64_t>(alignment()))
    corrupt(concat("written with ", prefix.alignment, "-byte alignment, read with ", alignment()));
  if (prefix.generation != generation_)
    corrupt(concat("its header is from write ", prefix.generation, ", the last write was ", generation_));
  for (size_t i = 0; i < spans.size(); ++i) {
    SpanRecord record;
    std::memcpy(&record, header + sizeof prefix + i * sizeof record, sizeof record);
    if (record.bytes != static_cast<uint64_t>(spans[i].bytes))
      corrupt(concat("span ", i, " holds ", record.bytes, " bytes, ", spans[i].bytes, " were asked for"));
    if (xxhash64(spans[i].data, static_cast<size_t>(spans[i].bytes)) != record.checksum)
      corrupt(concat("span ", i, "'s ", spans[i].bytes, " bytes do not match their checksum"));
  }
}

}  // namespace fathom::offload
