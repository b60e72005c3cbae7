#pragma once
// A whole file mapped into memory. The kernel pages bytes in as they are read and drops them
// under memory pressure, so a 20 GB token shard or checkpoint costs address space, not resident
// memory. Used by the token datasets (read-only) and by safetensors (private copy-on-write, so
// a tensor viewing the mapping can be written without touching the file or faulting).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace fathom {

class MappedFile {
 public:
  enum class Access { ReadOnly, PrivateWritable };
  // Throws fathom::Error "<what> '<path>': ..." when the file cannot be opened, is not a regular
  // file or cannot be mapped. An empty file is a valid, zero-byte view (the caller decides
  // whether empty is an error, and says why in its own terms).
  static std::shared_ptr<const MappedFile> open(const std::string& path, Access access = Access::ReadOnly,
                                                const std::string& what = "file");
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  // Writable bytes of a PrivateWritable mapping (writes stay in this process).
  unsigned char* private_data() const;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
  Access access_ = Access::ReadOnly;
  std::string path_;
};

}  // namespace fathom
