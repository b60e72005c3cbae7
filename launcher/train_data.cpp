#include "launcher/train_data.h"

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "engine/byte_text_dataset.h"
#include "launcher/default_corpus.h"

namespace fathom::launcher {
namespace {

bool is_token_file(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0; }

std::shared_ptr<TokenDataset> read_data(const std::string& path, int64_t block_size, int64_t vocab_size,
                                        bool vocab_given) {
  if (!is_token_file(path)) return std::make_shared<ByteTextDataset>(ByteTextDataset::from_file(path, block_size));
  try {
    return std::make_shared<TokenDataset>(
        TokenDataset::from_file(path, block_size, TokenFileOptions{TokenFileFormat::Auto, vocab_size}));
  } catch (const Error& e) {
    if (vocab_given || e.message().find("outside the vocabulary") == std::string::npos) throw;
    FATHOM_FAIL(e.message(), "; fathom-train assumed GPT-2's vocabulary (", kGpt2VocabSize,
                ") because --vocab-size was not given: pass --vocab-size N, N the tokenizer's vocabulary size");
  }
}

// The val.bin nanoGPT's prepare.py writes beside train.bin, if there is one.
std::string sibling_val_file(const std::string& data_path) {
  const std::filesystem::path data(data_path);
  if (data.filename() != "train.bin") return "";
  const std::filesystem::path val = data.parent_path() / "val.bin";
  return std::filesystem::exists(val) ? val.string() : "";
}

void check_fits(const TokenDataset& set, const std::string& what, int64_t batch, const std::string& batch_name,
                const std::string& remedy) {
  if (set.size() >= batch) return;
  const int64_t window = set.block_size() + 1;
  FATHOM_FAIL(what, " has ", set.num_tokens(), " tokens: ", set.size(), " sequence", set.size() == 1 ? "" : "s", " of ",
              window, " tokens (--block-size ", set.block_size(), " + 1), fewer than ", batch_name, " of ", batch,
              "; it needs at least ", batch * set.block_size() + 1, " tokens: ", remedy);
}

}  // namespace

TrainData load_train_data(const std::string& data_path, const std::string& val_path, int64_t block_size,
                          int64_t vocab_size, int64_t global_batch) {
  TrainData data;
  const bool vocab_given = vocab_size > 0;
  std::shared_ptr<TokenDataset> all;
  if (data_path.empty()) {
    data.name = "built-in corpus";
    all = std::make_shared<ByteTextDataset>(ByteTextDataset::from_string(std::string(default_corpus()), block_size));
  } else {
    data.name = data_path;
    if (is_token_file(data_path) && !vocab_given) vocab_size = kGpt2VocabSize;
    all = read_data(data_path, block_size, vocab_size, vocab_given);
  }
  data.vocab_size = all->vocab_size() > 0 ? all->vocab_size() : vocab_size;

  const std::string val_file = !val_path.empty() ? val_path : sibling_val_file(data_path);
  if (!val_file.empty()) {
    FATHOM_CHECK(is_token_file(val_file) == is_token_file(data.name), "--val-data ", val_file, " and --data ",
                 data.name, " must be the same kind of file: both token .bin files or both text");
    data.train = all;
    data.val = read_data(val_file, block_size, data.vocab_size, vocab_given);
    data.val_source = val_file + (val_path.empty() ? ", beside train.bin" : "");
  } else {
    const int64_t window = block_size + 1;
    const auto val_tokens =
        static_cast<int64_t>(std::llround(static_cast<double>(all->num_tokens()) * kValidationFraction));
    FATHOM_CHECK(val_tokens >= window, "the validation set (the last 5% of ", data.name, ") would have ", val_tokens,
                 " tokens, fewer than one sequence of ", window, " (--block-size ", block_size, " + 1): give at least ",
                 static_cast<int64_t>(std::ceil(static_cast<double>(window) / kValidationFraction)),
                 " tokens of data, a --val-data file, or a smaller --block-size");
    const TrainValSplit split = split_train_val(*all, kValidationFraction);
    data.train = std::make_shared<TokenDataset>(split.train);
    data.val = std::make_shared<TokenDataset>(split.val);
    data.val_source = "the last 5% of the data";
  }
  check_fits(*data.train, "the training set (" + data.name + ")", global_batch, "one global batch",
             "give more data, a smaller --block-size, or a config with a smaller train_batch_size");
  check_fits(*data.val, "the validation set (" + data.val_source + ")", 1, "one sequence",
             "give a larger --val-data file or a smaller --block-size");
  return data;
}

}  // namespace fathom::launcher
