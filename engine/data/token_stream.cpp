#include "engine/data/token_stream.h"

#include <bit>

#include "core/error.h"

namespace fathom {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian uint16; a big-endian host would need a byte swap in TokenStream::at");

TokenStream TokenStream::slice(int64_t begin, int64_t end) const {
  FATHOM_CHECK(0 <= begin && begin <= end && end <= size, source, ": token range [", begin, ", ", end,
               ") is outside the stream's ", size, " tokens");
  TokenStream part = *this;
  part.bytes = bytes + begin * width;
  part.size = end - begin;
  part.first_token = first_token + begin;
  return part;
}

std::string TokenStream::where(int64_t i) const {
  return detail::concat("token offset ", first_token + i, " (byte ", first_byte + (first_token + i) * width, ")");
}

void check_vocab(const TokenStream& stream, int64_t vocab_size) {
  if (vocab_size <= 0) return;
  for (int64_t i = 0; i < stream.size; ++i) {
    const uint32_t token = stream.at(i);
    if (token >= static_cast<uint64_t>(vocab_size)) [[unlikely]]
      FATHOM_FAIL(stream.source, ": ", stream.where(i), " holds token id ", token, ", outside the vocabulary of ",
                  vocab_size, " ids (0..", vocab_size - 1,
                  "); the data was tokenised with a different tokenizer, or vocab_size is wrong");
  }
}

}  // namespace fathom
