#include "engine/data_mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace fathom::data {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  const std::string where = "file '" + path + "': ";
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
  mapped->size_ = static_cast<uint64_t>(st.st_size);
  if (mapped->size_ == 0) return mapped;  // mmap rejects length 0
  void* base = ::mmap(nullptr, mapped->size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  FATHOM_CHECK(base != MAP_FAILED, where, "cannot mmap ", mapped->size_, " bytes: ", std::strerror(errno));
  mapped->data_ = static_cast<const unsigned char*>(base);
  return mapped;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace fathom::data
