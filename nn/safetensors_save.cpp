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
#include <limits>

#include "core/json_writer.h"
#include "core/xxhash64.h"
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
  // Contiguous CPU copies only where needed; the common case (contiguous CPU tensors) copies nothing.
  std::vector<StreamedTensor> streamed;
  streamed.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    FATHOM_CHECK(tensor.defined(), "save_safetensors('", path, "'): tensor '", name, "' is undefined");
    const Tensor flat = tensor.to(kCPU).contiguous().view({-1});
    streamed.push_back({name, tensor.dtype(), tensor.sizes(),
                        [flat](int64_t begin, int64_t count) { return flat.narrow(0, begin, count); }});
  }
  save_safetensors_streamed(path, std::move(streamed), metadata, std::numeric_limits<int64_t>::max());
}

void save_safetensors_streamed(const std::string& path, std::vector<StreamedTensor> tensors,
                               const std::map<std::string, std::string>& metadata, int64_t chunk_bytes) {
  FATHOM_CHECK(chunk_bytes > 0, "save_safetensors('", path, "'): the chunk size must be > 0");
  // Name order is the file order, so the bytes of a saved model do not depend on the order the
  // caller happened to list its parameters in.
  for (const StreamedTensor& t : tensors) {
    FATHOM_CHECK(!t.name.empty(), "save_safetensors('", path, "'): a tensor has an empty name");
    FATHOM_CHECK(t.name != "__metadata__", "save_safetensors('", path,
                 "'): \"__metadata__\" is reserved for the metadata map; rename the tensor");
    FATHOM_CHECK(t.read != nullptr, "save_safetensors('", path, "'): tensor '", t.name, "' has no source");
  }
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (size_t i = 1; i < tensors.size(); ++i)
    FATHOM_CHECK(tensors[i - 1].name != tensors[i].name, "save_safetensors('", path, "'): tensor name '",
                 tensors[i].name, "' appears twice; names must be unique");

  std::map<std::string, std::string> all_metadata{{"format", "pt"}};
  for (const auto& [key, value] : metadata) all_metadata[key] = value;

  JsonWriter w(JsonWriter::Layout::Compact);
  w.begin_object().key("__metadata__").begin_object();
  for (const auto& [key, value] : all_metadata) w.member(key, value);
  w.end_object();
  int64_t offset = 0;
  for (const StreamedTensor& t : tensors) {
    w.key(t.name).begin_object().member("dtype", safetensors_dtype_name(t.dtype));
    w.key("shape").begin_array();
    for (const int64_t size : t.shape) w.value(size);
    const int64_t end = offset + shape_numel(t.shape) * static_cast<int64_t>(element_size(t.dtype));
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
  for (const StreamedTensor& t : tensors) {
    const int64_t numel = shape_numel(t.shape);
    const int64_t chunk = std::max<int64_t>(1, chunk_bytes / static_cast<int64_t>(element_size(t.dtype)));
    Xxhash64Stream checksum;
    for (int64_t begin = 0; begin < numel; begin += chunk) {
      const int64_t count = std::min(chunk, numel - begin);
      const Tensor part = t.read(begin, count).to(kCPU).contiguous();
      FATHOM_CHECK(part.numel() == count && part.dtype() == t.dtype, "save_safetensors('", path, "'): tensor '",
                   t.name, "' gave ", part.numel(), " ", dtype_name(part.dtype()), " elements at ", begin, " where ",
                   count, " ", dtype_name(t.dtype), " were asked for");
      file.write(part.raw_data(), part.nbytes());
      if (t.checksum) checksum.update(part.raw_data(), part.nbytes());
    }
    if (t.checksum) *t.checksum = checksum.digest();
  }
  file.commit();
}

}  // namespace fathom::nn
