#pragma once
// fathom-train's data: the built-in corpus, a token .bin (nanoGPT raw uint16 or llm.c) or any
// other file read as bytes, with its validation set — a --val-data file, the val.bin beside a
// train.bin (nanoGPT's layout), or else the last 5% of the training data.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/token_dataset.h"
#include "apps/train/train_options.h"

namespace fathom::apps {

inline constexpr int64_t kGpt2VocabSize = 50257;
inline constexpr double kValidationFraction = 0.05;

struct TrainData {
  std::shared_ptr<TokenDataset> train, val;
  std::string name;        // "built-in corpus" or the --data path
  std::string val_source;  // where the validation set comes from, for the log
  int64_t vocab_size = 0;  // the model's vocabulary: 256 for bytes, the token file's otherwise
};

// `vocab_size` 0: bytes have 256, and a token file GPT-2's 50257 (as nanoGPT assumes without a
// meta.pkl), each token checked against it; an id outside is an error that names the flag. A
// --vocab-size other than 256 for text is an error (it cannot apply to bytes).
// The training set must hold one global batch of `global_batch` sequences and the validation set
// one sequence: otherwise an error that names the set, its size and what would fit.
TrainData load_train_data(const std::string& data_path, const std::string& val_path, int64_t block_size,
                          int64_t vocab_size, int64_t global_batch, DataFormat format = DataFormat::Auto);

}  // namespace fathom::apps
