#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace fathom {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, Access access, const std::string& what) {
  const std::string where = what + " '" + path + "': ";
  // The descriptor is only needed until the mapping exists.
  struct Descriptor {
    int fd;
    ~Descriptor() {
      if (fd >= 0) ::close(fd);
    }
  } file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  FATHOM_CHECK(file.fd >= 0, where, "cannot open: ", std::strerror(errno));
  struct stat st {};
  FATHOM_CHECK(::fstat(file.fd, &st) == 0, where, "cannot stat: ", std::strerror(errno));
  FATHOM_CHECK(S_ISREG(st.st_mode), where, "not a regular file");

  std::shared_ptr<MappedFile> mapped(new MappedFile());
  mapped->path_ = path;
  mapped->access_ = access;
  mapped->size_ = static_cast<uint64_t>(st.st_size);
  if (mapped->size_ == 0) return mapped;  // mmap rejects length 0
  const int protection = access == Access::PrivateWritable ? PROT_READ | PROT_WRITE : PROT_READ;
  void* base = ::mmap(nullptr, mapped->size_, protection, MAP_PRIVATE, file.fd, 0);
  FATHOM_CHECK(base != MAP_FAILED, where, "cannot mmap ", mapped->size_, " bytes: ", std::strerror(errno));
  mapped->data_ = static_cast<unsigned char*>(base);
  return mapped;
}

unsigned char* MappedFile::private_data() const {
  FATHOM_CHECK(access_ == Access::PrivateWritable, "file '", path_, "' is mapped read-only");
  return data_;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace fathom
