#include "engine/data/token_dataset.h"

#include <cmath>
#include <memory>

namespace fathom {

TokenDataset::TokenDataset(TokenStream stream, int64_t block_size, int64_t vocab_size)
    : TokenDataset(std::move(stream), block_size, vocab_size, VocabChecked{}) {
  // Checked after the shape checks, so an empty or short stream reports that first.
  check_vocab(stream_, vocab_size_);
}

TokenDataset::TokenDataset(TokenStream stream, int64_t block_size, int64_t vocab_size, VocabChecked)
    : stream_(std::move(stream)), block_size_(block_size), vocab_size_(vocab_size) {
  FATHOM_CHECK(block_size_ >= 1, stream_.source, ": block_size is ", block_size_, "; it must be at least 1");
  FATHOM_CHECK(vocab_size_ >= 0, stream_.source, ": vocab_size is ", vocab_size_,
               "; give the tokenizer's vocabulary size, or 0 to skip the check");
  FATHOM_CHECK(stream_.size >= block_size_ + 1, stream_.source, ": ", stream_.size,
               " tokens are fewer than one sample of block_size + 1 = ", block_size_ + 1,
               " tokens; use more data or a smaller block_size");
}

TokenDataset TokenDataset::from_file(const std::string& path, int64_t block_size, const TokenFileOptions& options) {
  return TokenDataset(read_token_file(path, options.format), block_size, options.vocab_size);
}

TokenDataset TokenDataset::from_tokens(const std::vector<uint16_t>& tokens, int64_t block_size, int64_t vocab_size) {
  auto owned = std::make_shared<std::vector<uint16_t>>(tokens);
  TokenStream stream;
  stream.bytes = reinterpret_cast<const unsigned char*>(owned->data());
  stream.owner = owned;
  stream.size = static_cast<int64_t>(owned->size());
  stream.width = 2;
  stream.source = "in-memory tokens";
  return TokenDataset(std::move(stream), block_size, vocab_size);
}

Sample TokenDataset::get(int64_t index) const {
  check_index(index, "TokenDataset");
  const int64_t T = block_size_;
  Tensor input = Tensor::empty({T}, DType::I64);
  Tensor target = Tensor::empty({T}, DType::I64);
  int64_t* in = input.data<int64_t>();
  int64_t* out = target.data<int64_t>();
  const int64_t start = index * T;
  // The window's T + 1 tokens: input is the first T, target the last T.
  int64_t previous = stream_.at(start);
  for (int64_t t = 0; t < T; ++t) {
    in[t] = previous;
    previous = stream_.at(start + t + 1);
    out[t] = previous;
  }
  return {input, target};
}

int64_t TokenDataset::count_targets(int64_t index, int64_t) const {
  check_index(index, "TokenDataset");
  return block_size_;
}

TrainValSplit split_train_val(const TokenDataset& dataset, double val_fraction) {
  const TokenStream& stream = dataset.stream();
  FATHOM_CHECK(val_fraction > 0.0 && val_fraction < 1.0, stream.source, ": val_fraction is ", val_fraction,
               "; it must lie strictly between 0 and 1 (e.g. 0.1 keeps the last 10% of tokens for validation)");
  const int64_t n = stream.size;
  const int64_t val_tokens = std::llround(static_cast<double>(n) * val_fraction);
  const int64_t cut = n - val_tokens;
  const int64_t need = dataset.block_size() + 1;
  FATHOM_CHECK(cut >= need && val_tokens >= need, stream.source, ": val_fraction ", val_fraction, " splits its ", n,
               " tokens into ", cut, " training and ", val_tokens, " validation tokens, but each part needs at least ",
               need, " (block_size + 1); choose a val_fraction between ", static_cast<double>(need) / n, " and ",
               1.0 - static_cast<double>(need) / n, ", or use more data");
  // The parts were checked against the vocabulary with the whole stream; don't scan twice.
  const int64_t vocab = dataset.vocab_size();
  return {TokenDataset(stream.slice(0, cut), dataset.block_size(), vocab, TokenDataset::VocabChecked{}),
          TokenDataset(stream.slice(cut, n), dataset.block_size(), vocab, TokenDataset::VocabChecked{})};
}

}  // namespace fathom
