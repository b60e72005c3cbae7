#include "offload/direct_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "offload/io_faults.h"

namespace fathom::offload {

struct DirectFile::Handle {
  int fd = -1;
  std::string path;
  int64_t alignment = 512;
  ~Handle() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// What the kernel says direct I/O on this file needs (Linux 6.1+); otherwise the block size,
// which is a multiple of the logical block size and so always enough, if sometimes more.
int64_t direct_io_alignment(int fd) {
  int64_t alignment = 0;
#ifdef STATX_DIOALIGN
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) != 0 &&
      sx.stx_dio_offset_align != 0)
    alignment = std::max<int64_t>(sx.stx_dio_mem_align, sx.stx_dio_offset_align);
#endif
  if (alignment == 0) {
    struct stat st {};
    if (::fstat(fd, &st) == 0) alignment = st.st_blksize;
  }
  alignment = std::max<int64_t>(alignment, 512);
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(alignment)));
}

[[noreturn]] void fail_open(const std::string& path, int error) {
  const std::string why = std::strerror(error);
  if (error == EINVAL)
    FATHOM_FAIL("cannot open swap file '", path, "' with O_DIRECT: its file system does not support direct I/O (", why,
                "); put nvme_path on a local disk file system that supports O_DIRECT (ext4, xfs), not tmpfs, "
                "overlayfs or a network mount");
  if (error == EACCES || error == EROFS || error == EPERM)
    FATHOM_FAIL("cannot open swap file '", path, "': not writable (", why,
                "); point nvme_path at a directory this process can write");
  if (error == ENOENT || error == ENOTDIR) {
    const std::string directory = std::filesystem::path(path).parent_path().string();
    FATHOM_FAIL("cannot open swap file '", path, "': directory '", directory, "' does not exist (", why,
                "); create it or point nvme_path at an existing directory");
  }
  FATHOM_FAIL("cannot open swap file '", path, "': ", why);
}

}  // namespace

DirectFile::DirectFile(std::string path) {
  auto handle = std::make_shared<Handle>();
  handle->path = std::move(path);
  if (io_faults().refuse_direct_io) fail_open(handle->path, EINVAL);
  handle->fd = ::open(handle->path.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
  if (handle->fd < 0) fail_open(handle->path, errno);
  handle->alignment = direct_io_alignment(handle->fd);
  handle_ = std::move(handle);
}

const std::string& DirectFile::path() const { return handle_->path; }
int DirectFile::fd() const { return handle_->fd; }
int64_t DirectFile::alignment() const { return handle_->alignment; }

void DirectFile::truncate(int64_t bytes) {
  FATHOM_CHECK(bytes >= 0, "cannot truncate '", path(), "' to ", bytes, " bytes: the size must be >= 0");
  FATHOM_CHECK(::ftruncate(fd(), bytes) == 0, "cannot truncate '", path(), "' to ", bytes,
               " bytes: ", std::strerror(errno));
}

int64_t DirectFile::size() const {
  struct stat st {};
  FATHOM_CHECK(::fstat(fd(), &st) == 0, "cannot stat '", path(), "': ", std::strerror(errno));
  return st.st_size;
}

int64_t DirectFile::round_up(int64_t bytes, int64_t alignment) {
  FATHOM_CHECK(alignment > 0, "DirectFile::round_up: alignment ", alignment, " must be > 0");
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace fathom::offload
