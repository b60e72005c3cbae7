#pragma once
// TokenDataset: a token stream cut into language-modelling samples.
//
// With block size T, sample i is tokens [i*T, i*T + T + 1): input = the first T, target = the
// last T (each input token's next token). Windows do not overlap except for that one shared
// boundary token, so an epoch sees every token once as a target — (n - 1) / T samples from n
// tokens; the tail that does not fill a window is unused.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/token_file.h"
#include "engine/data/token_stream.h"
#include "engine/data/dataset.h"

namespace fathom {

struct TokenFileOptions {
  TokenFileFormat format = TokenFileFormat::Auto;
  // When > 0, every token is checked on load to be < vocab_size (a wrong tokenizer fails at
  // once, naming the token's offset and value, not as an out-of-range embedding lookup later).
  int64_t vocab_size = 0;
};

struct TrainValSplit;

class TokenDataset : public Dataset {
 public:
  // Throws when the stream is shorter than one window (block_size + 1 tokens) or holds a token
  // outside vocab_size (when vocab_size > 0).
  TokenDataset(TokenStream stream, int64_t block_size, int64_t vocab_size = 0);
  static TokenDataset from_file(const std::string& path, int64_t block_size, const TokenFileOptions& options = {});
  static TokenDataset from_tokens(const std::vector<uint16_t>& tokens, int64_t block_size, int64_t vocab_size = 0);

  int64_t size() const override { return (stream_.size - 1) / block_size_; }
  // input [T] i64, target [T] i64.
  Sample get(int64_t index) const override;
  // Every target of a token window counts: token ids are never negative, so never ignore_index.
  int64_t count_targets(int64_t index, int64_t ignore_index = kIgnoreIndex) const override;

  int64_t block_size() const { return block_size_; }
  int64_t num_tokens() const { return stream_.size; }
  int64_t vocab_size() const { return vocab_size_; }  // 0 when not given
  const TokenStream& stream() const { return stream_; }

 protected:
  // For streams already known to fit the vocabulary (bytes; the parts of a checked stream).
  struct VocabChecked {};
  TokenDataset(TokenStream stream, int64_t block_size, int64_t vocab_size, VocabChecked);

 private:
  friend TrainValSplit split_train_val(const TokenDataset&, double);

  TokenStream stream_;
  int64_t block_size_;
  int64_t vocab_size_;
};

// The last `val_fraction` of the token stream (rounded to whole tokens) becomes the
// validation set and the rest the training set, nanoGPT-style: no token is a target in both,
// and the split does not depend on the block size. Both parts must hold one window.
struct TrainValSplit {
  TokenDataset train;
  TokenDataset val;
};
TrainValSplit split_train_val(const TokenDataset& dataset, double val_fraction);

}  // namespace fathom
