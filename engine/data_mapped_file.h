#pragma once
// A whole file mapped read-only into memory, for token files far larger than RAM: the kernel
// pages tokens in as samples are read and drops them under memory pressure, so a 20 GB
// FineWeb shard costs address space, not resident memory.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace fathom::data {

class MappedFile {
 public:
  // Throws fathom::Error naming the path when the file cannot be opened, is not a regular file
  // or cannot be mapped. An empty file is mapped as a valid, zero-byte view (the caller decides
  // whether empty is an error, and says why in its own terms).
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

}  // namespace fathom::data
