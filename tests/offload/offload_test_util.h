#pragma once
// Shared by the offload tests: a scratch directory and page-aligned buffers.

#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "offload/swap_file.h"

namespace fathom::testing {

// A fresh directory in the working directory (a local disk, which O_DIRECT needs; /tmp may be a
// tmpfs without it on older kernels), removed with everything in it.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name = "offload") {
    std::string pattern = (std::filesystem::current_path() / ("fathom_" + name + "_XXXXXX")).string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    ::chmod(path.c_str(), 0700);
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

// Host-tier-like memory: page-aligned, its capacity padded to whole pages, zeroed.
struct AlignedBuffer {
  std::unique_ptr<unsigned char, decltype(&std::free)> memory;
  int64_t bytes, capacity;
  explicit AlignedBuffer(int64_t n)
      : memory(nullptr, &std::free), bytes(n), capacity(std::max<int64_t>(4096, (n + 4095) / 4096 * 4096)) {
    memory.reset(static_cast<unsigned char*>(std::aligned_alloc(4096, static_cast<size_t>(capacity))));
    REQUIRE(memory != nullptr);
    std::memset(memory.get(), 0, static_cast<size_t>(capacity));
  }
  unsigned char* data() const { return memory.get(); }
  offload::SwapSpan span() const { return {memory.get(), bytes, capacity}; }
  void randomize(uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < bytes; ++i) memory.get()[i] = static_cast<unsigned char>(rng());
  }
  bool same(const AlignedBuffer& other, int64_t n) const { return std::memcmp(data(), other.data(), n) == 0; }
  bool same(const AlignedBuffer& other) const { return same(other, bytes); }
};

}  // namespace fathom::testing
