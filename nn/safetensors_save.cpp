// safetensors writing: header built in memory, tensor bytes streamed straight from each tensor's
// (contiguous, CPU) storage, written to a temporary file that is fsynced and renamed into place.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/json_writer.h"
#include "nn/safetensors.h"

namespace fathom::nn {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// Owns the temporary file until it has been renamed into place; removes it on any failure.
class TempFile {
 public:
  TempFile(const std::string& path, const std::string& final_path) : path_(path), final_path_(final_path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FATHOM_CHECK(fd_ >= 0, "save_safetensors: cannot create '", path, "': ", std::strerror(errno),
                 " (does the directory exist and is it writable?)");
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, size_t size) {
    const char* bytes = static_cast<const char*>(data);
    while (size > 0) {
      // Bounded chunks: some kernels cap a single write() well below SIZE_MAX.
      const ssize_t written = ::write(fd_, bytes, std::min<size_t>(size, size_t{1} << 30));
      if (written < 0 && errno == EINTR) continue;
      FATHOM_CHECK(written > 0, "save_safetensors: writing '", path_, "' failed: ", std::strerror(errno),
                   " (disk full?)");
      bytes += written;
      size -= static_cast<size_t>(written);
    }
  }

  // fsync before rename: otherwise a crash could leave the new name pointing at an empty file.
  void commit() {
    FATHOM_CHECK(::fsync(fd_) == 0, "save_safetensors: fsync of '", path_, "' failed: ", std::strerror(errno));
    const int rc = ::close(fd_);
    fd_ = -1;
    FATHOM_CHECK(rc == 0, "save_safetensors: closing '", path_, "' failed: ", std::strerror(errno));
    FATHOM_CHECK(::rename(path_.c_str(), final_path_.c_str()) == 0, "save_safetensors: renaming '", path_, "' to '",
                 final_path_, "' failed: ", std::strerror(errno));
    committed_ = true;
    // Make the rename itself durable. Best effort: some file systems refuse fsync on a directory.
    const size_t slash = final_path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : final_path_.substr(0, slash));
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      (void)::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

 private:
  std::string path_;
  std::string final_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Name order is the file order, so the bytes of a saved model do not depend on the order the
  // caller happened to list its parameters in.
  std::vector<const std::pair<std::string, Tensor>*> sorted;
  for (const auto& entry : tensors) {
    FATHOM_CHECK(!entry.first.empty(), "save_safetensors('", path, "'): a tensor has an empty name");
    FATHOM_CHECK(entry.first != "__metadata__", "save_safetensors('", path,
                 "'): \"__metadata__\" is reserved for the metadata map; rename the tensor");
    FATHOM_CHECK(entry.second.defined(), "save_safetensors('", path, "'): tensor '", entry.first, "' is undefined");
    sorted.push_back(&entry);
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  for (size_t i = 1; i < sorted.size(); ++i)
    FATHOM_CHECK(sorted[i - 1]->first != sorted[i]->first, "save_safetensors('", path, "'): tensor name '",
                 sorted[i]->first, "' appears twice; names must be unique");

  // Contiguous CPU copies only where needed; the common case (contiguous CPU tensors) copies nothing.
  std::vector<Tensor> data;
  data.reserve(sorted.size());
  for (const auto* entry : sorted) data.push_back(entry->second.to(kCPU).contiguous());

  std::map<std::string, std::string> all_metadata{{"format", "pt"}};
  for (const auto& [key, value] : metadata) all_metadata[key] = value;

  JsonWriter w(JsonWriter::Layout::Compact);
  w.begin_object().key("__metadata__").begin_object();
  for (const auto& [key, value] : all_metadata) w.member(key, value);
  w.end_object();
  int64_t offset = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Tensor& tensor = data[i];
    w.key(sorted[i]->first).begin_object().member("dtype", safetensors_dtype_name(tensor.dtype()));
    w.key("shape").begin_array();
    for (int64_t d = 0; d < tensor.dim(); ++d) w.value(tensor.size(d));
    const int64_t end = offset + static_cast<int64_t>(tensor.nbytes());
    w.end_array().key("data_offsets").begin_array().value(offset).value(end).end_array().end_object();
    offset = end;
  }
  w.end_object();
  std::string header = w.str();
  // Padding to a multiple of 8 keeps the data section 8-byte aligned in the file, so a reader
  // that maps the file can view (not copy) every tensor whose offset suits its dtype.
  header.append((8 - header.size() % 8) % 8, ' ');

  TempFile file(path + ".tmp", path);
  const uint64_t header_size = header.size();
  file.write(&header_size, 8);
  file.write(header.data(), header.size());
  for (const Tensor& tensor : data)
    if (tensor.nbytes() > 0) file.write(tensor.raw_data(), tensor.nbytes());
  file.commit();
}

}  // namespace fathom::nn
