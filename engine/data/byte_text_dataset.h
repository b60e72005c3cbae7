#pragma once
// ByteTextDataset: any text as a token stream of its bytes (vocabulary 256, no tokenizer), cut
// into windows exactly like TokenDataset — the zero-setup dataset for tutorials and tests
// (e.g. tiny Shakespeare). UTF-8 multi-byte characters simply become several tokens.

#include <string>

#include "engine/data/token_dataset.h"

namespace fathom {

class ByteTextDataset : public TokenDataset {
 public:
  static constexpr int64_t kVocabSize = 256;
  // The file is memory-mapped, so a large corpus is not read into memory.
  static ByteTextDataset from_file(const std::string& path, int64_t block_size);
  static ByteTextDataset from_string(std::string text, int64_t block_size);

 private:
  // Every byte is below 256: no vocabulary scan needed.
  ByteTextDataset(TokenStream bytes, int64_t block_size)
      : TokenDataset(std::move(bytes), block_size, kVocabSize, VocabChecked{}) {}
};

}  // namespace fathom
