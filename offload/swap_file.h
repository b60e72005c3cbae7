#pragma once
// SwapFile: one sub-group's tensors in one file, written and read so that a later read can never
// take a half-written, truncated or foreign state as valid.
//
// Layout: a header at offset 0 (magic "FTHMSWAP", format version, generation, the file's
// alignment, and each span's byte count and xxhash64, then a checksum of the header itself),
// padded to the alignment — one block for up to 29 spans at 512-byte alignment — followed by
// each span at an offset rounded up to the alignment. Writes put the data down first and the
// header after it has landed, so an interrupted write leaves a header whose checksums do not
// match the data; a read checks every field and checksum before the caller may use the bytes.
//
// Not thread-safe: one owner drives begin/finish in turn.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "offload/direct_file.h"
#include "offload/io_engine.h"

namespace fathom::offload {

// Caller memory for one tensor: `bytes` of data in a block of `capacity` bytes. The file moves
// round_up(bytes, alignment) bytes, so `data` must be aligned and `capacity` cover that.
struct SwapSpan {
  void* data;
  int64_t bytes;
  int64_t capacity;
};

class SwapFile {
 public:
  // Creates or opens `path` (its old contents count for nothing until this object writes).
  SwapFile(IoEngine& engine, std::string path);
  // Waits for I/O still in flight (ignoring its errors): the engine must not be left writing
  // into buffers the caller is about to free, or reading from a closed header buffer.
  ~SwapFile();
  SwapFile(SwapFile&&) noexcept;
  SwapFile& operator=(SwapFile&&) = delete;
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  // Checksums the spans, then submits their writes; the memory must stay alive and unchanged
  // until finish_write. The state the file held before is invalid from here on.
  void begin_write(const std::vector<SwapSpan>& spans);
  // Waits for the data, then writes the header; has_state() afterwards.
  void finish_write();
  // Submits the header read and every span read (the same byte counts as written, in order).
  void begin_read(const std::vector<SwapSpan>& spans);
  // Waits, then checks the header and every span's checksum; throws when anything differs.
  void finish_read();

  // Whether a complete write by this object finished (a read is only accepted then).
  bool has_state() const { return has_state_; }
  const std::string& path() const { return file_.path(); }
  // Bytes the layout of the last begin_write or begin_read occupies (header and padded spans).
  int64_t file_bytes() const { return file_bytes_; }
  int64_t alignment() const { return file_.alignment(); }

 private:
  enum class Pending { None, Write, Read };
  struct FreeAligned {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  // Checks the spans and lays them out: header size, each span's offset, file_bytes_.
  void plan(const std::vector<SwapSpan>& spans, const char* op);
  unsigned char* header_buffer(int64_t bytes);
  void wait_all();  // waits every pending ticket, rethrows the first error
  [[noreturn]] void corrupt(const std::string& what) const;

  IoEngine* engine_;
  DirectFile file_;
  std::unique_ptr<unsigned char, FreeAligned> header_;
  int64_t header_capacity_ = 0;
  int64_t header_bytes_ = 0;
  int64_t file_bytes_ = 0;
  std::vector<int64_t> offsets_;
  std::vector<SwapSpan> spans_;      // of the pending operation
  std::vector<uint64_t> checksums_;  // of the pending write's spans
  std::vector<IoTicket> tickets_;
  Pending pending_ = Pending::None;
  uint64_t generation_ = 0;  // of the last complete write
  bool has_state_ = false;
};

}  // namespace fathom::offload
