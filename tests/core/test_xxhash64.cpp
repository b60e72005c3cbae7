// XXH64 against the reference implementation's outputs (python xxhash 3.x, seed 0), covering
// each tail path (bytes, 4-byte word, 8-byte words) and the 32-byte stripe loop.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/xxhash64.h"

using fathom::xxhash64;

TEST_CASE("xxhash64 matches the reference vectors", "[hash]") {
  const auto of = [](const std::string& s) { return xxhash64(s.data(), s.size()); };
  CHECK(of("") == 0xef46db3751d8e999ull);
  CHECK(of("a") == 0xd24ec4f1a98c6e5bull);
  CHECK(of("abc") == 0x44bc2cf5ad770999ull);
  CHECK(of("0123456789abcdef0123456789abcdef!") == 0x8afff4daac4e677eull);
  std::string long_input;
  for (int copy = 0; copy < 3; ++copy)
    for (int b = 0; b < 256; ++b) long_input.push_back(static_cast<char>(b));
  long_input += "fathom";
  CHECK(of(long_input) == 0x66fc644b26b72939ull);
}

TEST_CASE("xxhash64 changes with any flipped bit and does not depend on alignment", "[hash]") {
  std::vector<unsigned char> buffer(1000 + 8);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<unsigned char>(i * 37 + 11);
  const uint64_t base = xxhash64(buffer.data() + 1, 1000);
  std::vector<unsigned char> moved(buffer.begin() + 1, buffer.begin() + 1001);
  CHECK(xxhash64(moved.data(), moved.size()) == base);
  for (size_t at : {size_t{0}, size_t{500}, size_t{999}}) {
    moved[at] ^= 0x10;
    CHECK(xxhash64(moved.data(), moved.size()) != base);
    moved[at] ^= 0x10;
  }
}

TEST_CASE("xxhash64 over pieces equals xxhash64 of the whole, however the bytes are cut", "[hash]") {
  std::vector<unsigned char> buffer(1000);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<unsigned char>(i * 91 + 7);
  for (const size_t length : {size_t{0}, size_t{5}, size_t{31}, size_t{32}, size_t{33}, size_t{1000}}) {
    const uint64_t whole = xxhash64(buffer.data(), length, 42);
    for (const size_t piece : {size_t{1}, size_t{3}, size_t{31}, size_t{32}, size_t{100}, size_t{1000}}) {
      INFO(length << " bytes in pieces of " << piece);
      fathom::Xxhash64Stream stream(42);
      for (size_t at = 0; at < length; at += piece) stream.update(buffer.data() + at, std::min(piece, length - at));
      CHECK(stream.digest() == whole);
    }
  }
}
