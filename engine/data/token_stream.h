#pragma once
// TokenStream: a read-only run of unsigned token ids in memory — a memory-mapped token file
// (uint16, 2 bytes each) or text read as bytes (1 byte each) — plus what an error message needs
// to point at a token in the file it came from.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace fathom {

struct TokenStream {
  std::shared_ptr<const void> owner;  // keeps the bytes alive (a MappedFile or an owned buffer)
  const unsigned char* bytes = nullptr;  // token 0
  int64_t size = 0;                      // tokens
  int width = 2;                         // bytes per token: 2 (uint16) or 1 (byte text)
  std::string source;                    // "file 'train.bin'" or "in-memory text", for errors
  int64_t first_byte = 0;   // byte offset of the source's first token (1024 after an llm.c header)
  int64_t first_token = 0;  // index of token 0 in the source (non-zero for a split's part)

  // Token `i` of this stream (no bounds check: the dataset checks sample indices).
  uint32_t at(int64_t i) const {
    if (width == 1) return bytes[i];
    uint16_t token;  // little-endian on disk and on every host Fathom builds for
    std::memcpy(&token, bytes + 2 * i, 2);
    return token;
  }
  // Tokens [begin, end) as a stream of their own, sharing the bytes.
  TokenStream slice(int64_t begin, int64_t end) const;
  // "token 12 (file byte 1048)": where token `i` sits in the source.
  std::string where(int64_t i) const;
};

// Throws naming the first token >= vocab_size, its offset and file byte; vocab_size <= 0 skips.
void check_vocab(const TokenStream& stream, int64_t vocab_size);

}  // namespace fathom
