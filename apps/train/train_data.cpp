#include "apps/train/train_data.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "engine/data/byte_text_dataset.h"
#include "engine/data/token_file.h"
#include "apps/train/default_corpus.h"

namespace fathom::apps {
namespace {

bool named_bin(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0; }

// Auto resolved by the file's name and content (DataFormat's comment).
DataFormat format_of(const std::string& path, DataFormat asked, const std::string& flag) {
  if (asked != DataFormat::Auto || named_bin(path)) return asked == DataFormat::Auto ? DataFormat::Tokens : asked;
  std::ifstream in(path, std::ios::binary);
  FATHOM_CHECK(in, flag, " ", path, ": cannot open the file; check the path");
  std::string head(64 << 10, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  int32_t magic = 0;
  if (head.size() >= 4) std::memcpy(&magic, head.data(), 4);
  if (magic == kLlmcMagic) return DataFormat::Tokens;
  FATHOM_CHECK(head.find('\0') == std::string::npos, flag, " ", path, " is not text (it holds NUL bytes) and is not "
               "named .bin: pass --data-format tokens for a token file (nanoGPT's raw uint16), or --data-format text "
               "to train on its bytes");
  return DataFormat::Text;
}

std::shared_ptr<TokenDataset> read_data(const std::string& path, DataFormat format, int64_t block_size,
                                        int64_t vocab_size, bool vocab_given) {
  if (format == DataFormat::Text) return std::make_shared<ByteTextDataset>(ByteTextDataset::from_file(path, block_size));
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
                          int64_t vocab_size, int64_t global_batch, DataFormat asked) {
  TrainData data;
  const bool vocab_given = vocab_size > 0;
  const DataFormat format = data_path.empty() ? DataFormat::Text : format_of(data_path, asked, "--data");
  data.name = data_path.empty() ? "built-in corpus" : data_path;
  FATHOM_CHECK(format != DataFormat::Text || !vocab_given || vocab_size == 256, "--vocab-size ", vocab_size,
               " cannot apply: --data ", data.name, " is read as text, whose tokens are its bytes (vocabulary 256); "
               "drop --vocab-size, or pass --data-format tokens if the file holds token ids");
  std::shared_ptr<TokenDataset> all;
  if (data_path.empty()) {
    all = std::make_shared<ByteTextDataset>(ByteTextDataset::from_string(std::string(default_corpus()), block_size));
  } else {
    if (format == DataFormat::Tokens && !vocab_given) vocab_size = kGpt2VocabSize;
    all = read_data(data_path, format, block_size, vocab_size, vocab_given);
  }
  data.vocab_size = all->vocab_size() > 0 ? all->vocab_size() : vocab_size;

  const std::string val_file = !val_path.empty() ? val_path : sibling_val_file(data_path);
  if (!val_file.empty()) {
    FATHOM_CHECK(format_of(val_file, asked, "--val-data") == format, "--val-data ", val_file, " and --data ", data.name,
                 " must be the same kind of file: both token files or both text");
    data.train = all;
    data.val = read_data(val_file, format, block_size, data.vocab_size, vocab_given);
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

}  // namespace fathom::apps
