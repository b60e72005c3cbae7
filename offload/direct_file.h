#pragma once
// A file opened for direct I/O (O_DIRECT): reads and writes go between the caller's buffer and
// the device without passing through the page cache, so swapping tens of GB of optimizer state
// neither doubles its memory footprint nor evicts everything else from the cache. The price is
// alignment: buffer address, file offset and length must all be multiples of alignment().

#include <cstdint>
#include <memory>
#include <string>

namespace fathom::offload {

class IoEngine;

class DirectFile {
 public:
  // Opens `path` read-write, creating it (mode 0644). Throws naming the path and the fix when the
  // directory is missing, the path is not writable, or the file system has no O_DIRECT.
  explicit DirectFile(std::string path);
  DirectFile(DirectFile&&) noexcept = default;
  DirectFile& operator=(DirectFile&&) noexcept = default;
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  const std::string& path() const;
  int fd() const;
  // The direct-I/O alignment: a power of two >= 512.
  int64_t alignment() const;
  void truncate(int64_t bytes);
  int64_t size() const;

  static int64_t round_up(int64_t bytes, int64_t alignment);

 private:
  friend class IoEngine;
  // Shared with the engine's queued requests, so that the descriptor stays open (and its number
  // is not reused by another file) until the last request on it has finished.
  struct Handle;
  std::shared_ptr<const Handle> handle_;
};

}  // namespace fathom::offload
