// The data layer: token windows, both token-file formats and their bad-file errors, byte text,
// seeded shuffling, the fixed global-sample -> micro-batch map across dp x gas, loss_normaliser
// and resuming from a saved position.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "test_util.h"
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/generator.h"
#include "engine/data/byte_text_dataset.h"
#include "engine/data/loader.h"
#include "engine/data/shuffle.h"
#include "engine/data/tensor_dataset.h"
#include "engine/data/token_dataset.h"

using namespace fathom;

using fathom::testing::error_of;

namespace {

// A scratch directory removed at the end of each test case.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("fathom_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<unsigned char> llmc_header(int32_t magic, int32_t version, int32_t count) {
  std::vector<unsigned char> bytes(1024, 0);
  std::memcpy(bytes.data(), &magic, 4);
  std::memcpy(bytes.data() + 4, &version, 4);
  std::memcpy(bytes.data() + 8, &count, 4);
  return bytes;
}

// The message of the fathom::Error that `fn` throws (without file:line), or "" if none.
std::vector<uint16_t> iota_tokens(int n) {
  std::vector<uint16_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), uint16_t{0});
  return tokens;
}

// N samples whose input is the sample's own index (so batches show which samples they hold).
std::shared_ptr<TensorDataset> indexed_dataset(int64_t n) {
  return std::make_shared<TensorDataset>(Tensor::arange(n, DType::F32).reshape({n, 1}), Tensor::arange(n, DType::I64));
}

}  // namespace

TEST_CASE("token windows: sample i is tokens i*T to i*T+T inclusive", "[engine][data]") {
  const TokenDataset data = TokenDataset::from_tokens(iota_tokens(21), 4);
  REQUIRE(data.size() == 5);  // (21 - 1) / 4
  for (int64_t i = 0; i < data.size(); ++i) {
    const Sample s = data.get(i);
    REQUIRE(s.input.dtype() == DType::I64);
    REQUIRE(s.input.sizes() == Shape{4});
    REQUIRE(s.input.to_vector<int64_t>() == std::vector<int64_t>{4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3});
    REQUIRE(s.target.to_vector<int64_t>() == std::vector<int64_t>{4 * i + 1, 4 * i + 2, 4 * i + 3, 4 * i + 4});
    REQUIRE(data.count_targets(i) == 4);
  }
  // 20 tokens only fill 4 windows: the last window would need token 20.
  REQUIRE(TokenDataset::from_tokens(iota_tokens(20), 4).size() == 4);
  REQUIRE(TokenDataset::from_tokens(iota_tokens(5), 4).size() == 1);
  REQUIRE(error_of([] { TokenDataset::from_tokens(iota_tokens(4), 4); }) ==
          "in-memory tokens: 4 tokens are fewer than one sample of block_size + 1 = 5 tokens; use more data or a "
          "smaller block_size");
  REQUIRE(error_of([&] { data.get(5); }) ==
          "TokenDataset: sample index 5 is out of range; the dataset has 5 samples (valid indices 0..4)");
}

TEST_CASE("token files: nanoGPT raw uint16 and llm.c header files read back", "[engine][data]") {
  TempDir dir;
  std::vector<uint16_t> tokens = iota_tokens(100);
  tokens[7] = 50256;  // GPT-2's <|endoftext|>: the top of the uint16 range matters
  write_token_file(dir.file("raw.bin"), tokens, TokenFileFormat::NanoGPT);
  write_token_file(dir.file("llmc.bin"), tokens, TokenFileFormat::LlmC);
  REQUIRE(std::filesystem::file_size(dir.file("raw.bin")) == 200);
  REQUIRE(std::filesystem::file_size(dir.file("llmc.bin")) == 1024 + 200);

  for (const auto& [name, format] : std::vector<std::pair<std::string, TokenFileFormat>>{
           {"raw.bin", TokenFileFormat::NanoGPT},
           {"raw.bin", TokenFileFormat::Auto},
           {"llmc.bin", TokenFileFormat::LlmC},
           {"llmc.bin", TokenFileFormat::Auto}}) {
    INFO(name << " read as " << token_file_format_name(format));
    const TokenStream stream = read_token_file(dir.file(name), format);
    REQUIRE(stream.size == 100);
    for (int64_t i = 0; i < stream.size; ++i) REQUIRE(stream.at(i) == tokens[i]);
    const TokenDataset data = TokenDataset::from_file(dir.file(name), 8, {.format = format, .vocab_size = 50257});
    REQUIRE(data.size() == 12);  // 99 / 8
    REQUIRE(data.get(0).target.to_vector<int64_t>()[6] == 50256);
  }
  // The llm.c header is exactly what llm.c's dev/data scripts write.
  std::ifstream in(dir.file("llmc.bin"), std::ios::binary);
  int32_t header[256];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  REQUIRE(header[0] == 20240520);
  REQUIRE(header[1] == 1);
  REQUIRE(header[2] == 100);
  REQUIRE(std::all_of(header + 3, header + 256, [](int32_t v) { return v == 0; }));
}

TEST_CASE("token files: empty, truncated and garbage files give exact errors", "[engine][data]") {
  TempDir dir;
  const std::string raw = dir.file("raw.bin"), llmc = dir.file("llmc.bin");
  const std::string raw_where = "token file '" + raw + "' (nanoGPT raw uint16): ";
  const std::string llmc_where = "token file '" + llmc + "' (llm.c): ";

  SECTION("missing file") {
    REQUIRE(error_of([&] { read_token_file(dir.file("absent.bin")); }) ==
            "file '" + dir.file("absent.bin") + "': cannot open: No such file or directory");
  }
  SECTION("empty raw file") {
    write_bytes(raw, {});
    REQUIRE(error_of([&] { read_token_file(raw); }) ==
            raw_where + "the file is empty (0 bytes); it holds no tokens — check that data preparation finished");
  }
  SECTION("odd raw length") {
    write_bytes(raw, {1, 0, 2, 0, 3});
    REQUIRE(error_of([&] { read_token_file(raw, TokenFileFormat::NanoGPT); }) ==
            raw_where + "odd length of 5 bytes: tokens are 2 bytes each, so the last byte (offset 4) is half a token; "
                        "the file is truncated or not a token file");
  }
  SECTION("empty llm.c file") {
    write_bytes(llmc, {});
    REQUIRE(error_of([&] { read_token_file(llmc, TokenFileFormat::LlmC); }) ==
            llmc_where + "the file is empty (0 bytes); it holds no header and no tokens — check that data preparation "
                         "finished");
  }
  SECTION("truncated llm.c header") {
    std::vector<unsigned char> bytes = llmc_header(20240520, 1, 10);
    bytes.resize(600);
    write_bytes(llmc, bytes);
    // Auto sees the magic and reads it as llm.c, so the truncation is reported, not misread as tokens.
    REQUIRE(error_of([&] { read_token_file(llmc); }) ==
            llmc_where + "the file is 600 bytes, shorter than the 1024-byte header (256 int32); it is truncated");
  }
  SECTION("wrong magic") {
    write_bytes(llmc, llmc_header(12345, 1, 0));
    REQUIRE(error_of([&] { read_token_file(llmc, TokenFileFormat::LlmC); }) ==
            llmc_where + "wrong magic 12345 at byte 0, expected 20240520; this is not an llm.c token file (a nanoGPT "
                         "raw file? read it with TokenFileFormat::NanoGPT)");
  }
  SECTION("wrong version") {
    write_bytes(llmc, llmc_header(20240520, 2, 0));
    REQUIRE(error_of([&] { read_token_file(llmc); }) ==
            llmc_where + "unsupported version 2 at byte 4; Fathom reads version 1 (uint16 tokens)");
  }
  SECTION("non-positive count") {
    write_bytes(llmc, llmc_header(20240520, 1, -3));
    REQUIRE(error_of([&] { read_token_file(llmc); }) ==
            llmc_where + "token count -3 at byte 8 must be positive; the header is corrupt or the file holds no tokens");
  }
  SECTION("count beyond the file") {
    std::vector<unsigned char> bytes = llmc_header(20240520, 1, 100);
    bytes.resize(1024 + 150);  // 75 tokens present
    write_bytes(llmc, bytes);
    REQUIRE(error_of([&] { read_token_file(llmc); }) ==
            llmc_where + "the header (byte 8) says 100 tokens, which end at byte 1224, but the file is only 1174 bytes; "
                         "it is truncated");
  }
  SECTION("trailing bytes") {
    std::vector<unsigned char> bytes = llmc_header(20240520, 1, 10);
    bytes.resize(1024 + 24);
    write_bytes(llmc, bytes);
    REQUIRE(error_of([&] { read_token_file(llmc); }) ==
            llmc_where + "the header (byte 8) says 10 tokens, which end at byte 1044, but the file is 1048 bytes (4 "
                         "trailing bytes); the header's token count is wrong or two files were concatenated");
  }
  SECTION("a directory is not a token file") {
    REQUIRE(error_of([&] { read_token_file(dir.path.string()); }) ==
            "file '" + dir.path.string() + "': not a regular file");
  }
}

TEST_CASE("token files: ids are checked against the vocabulary", "[engine][data]") {
  TempDir dir;
  std::vector<uint16_t> tokens = iota_tokens(50);
  tokens[37] = 60000;
  write_token_file(dir.file("llmc.bin"), tokens, TokenFileFormat::LlmC);
  REQUIRE(error_of([&] { TokenDataset::from_file(dir.file("llmc.bin"), 8, {.vocab_size = 50257}); }) ==
          "token file '" + dir.file("llmc.bin") +
              "': token offset 37 (byte 1098) holds token id 60000, outside the vocabulary of 50257 ids (0..50256); the "
              "data was tokenised with a different tokenizer, or vocab_size is wrong");
  // Without a vocabulary nothing is checked; with a big enough one, everything passes.
  REQUIRE(TokenDataset::from_file(dir.file("llmc.bin"), 8).size() == 6);
  REQUIRE(TokenDataset::from_file(dir.file("llmc.bin"), 8, {.vocab_size = 65536}).vocab_size() == 65536);
  REQUIRE(error_of([] { TokenDataset::from_tokens({1, 2, 3, 4, 5}, 2, 4); }) ==
          "in-memory tokens: token offset 3 (byte 6) holds token id 4, outside the vocabulary of 4 ids (0..3); the data "
          "was tokenised with a different tokenizer, or vocab_size is wrong");
}

TEST_CASE("train/val split keeps the last fraction of the stream for validation", "[engine][data]") {
  const TokenDataset data = TokenDataset::from_tokens(iota_tokens(101), 4, 1000);
  const TrainValSplit split = split_train_val(data, 0.1);
  REQUIRE(split.train.num_tokens() == 91);
  REQUIRE(split.val.num_tokens() == 10);
  REQUIRE(split.train.size() == 22);  // 90 / 4
  REQUIRE(split.val.size() == 2);     // 9 / 4
  REQUIRE(split.val.vocab_size() == 1000);
  REQUIRE(split.val.get(0).input.to_vector<int64_t>() == std::vector<int64_t>{91, 92, 93, 94});
  // The training windows never reach a validation token.
  REQUIRE(split.train.get(21).target.to_vector<int64_t>().back() == 88);
  REQUIRE(error_of([&] { split.val.get(2); }) ==
          "TokenDataset: sample index 2 is out of range; the dataset has 2 samples (valid indices 0..1)");
  REQUIRE(error_of([&] { split_train_val(data, 0.0); }) ==
          "in-memory tokens: val_fraction is 0; it must lie strictly between 0 and 1 (e.g. 0.1 keeps the last 10% of "
          "tokens for validation)");
  REQUIRE(error_of([&] { split_train_val(data, 0.02); }) ==
          "in-memory tokens: val_fraction 0.02 splits its 101 tokens into 99 training and 2 validation tokens, but each "
          "part needs at least 5 (block_size + 1); choose a val_fraction between 0.049505 and 0.950495, or use more "
          "data");
}

TEST_CASE("byte text: any text as bytes, vocabulary 256, same windows", "[engine][data]") {
  TempDir dir;
  const std::string text = "To be, or not to be: that is the question.\n\xc3\xa9";  // ends in UTF-8 'é'
  {
    std::ofstream out(dir.file("input.txt"), std::ios::binary);
    out << text;
  }
  const ByteTextDataset from_string = ByteTextDataset::from_string(text, 8);
  const ByteTextDataset from_file = ByteTextDataset::from_file(dir.file("input.txt"), 8);
  REQUIRE(from_string.vocab_size() == 256);
  REQUIRE(from_string.size() == (static_cast<int64_t>(text.size()) - 1) / 8);
  REQUIRE(from_file.size() == from_string.size());
  for (int64_t i = 0; i < from_string.size(); ++i) {
    REQUIRE(from_file.get(i).input.to_vector<int64_t>() == from_string.get(i).input.to_vector<int64_t>());
    REQUIRE(from_file.get(i).target.to_vector<int64_t>() == from_string.get(i).target.to_vector<int64_t>());
  }
  REQUIRE(from_string.get(0).input.to_vector<int64_t>() == std::vector<int64_t>{'T', 'o', ' ', 'b', 'e', ',', ' ', 'o'});
  REQUIRE(from_string.get(0).target.to_vector<int64_t>()[7] == 'r');
  // 45 bytes make 11 windows of 4 exactly; the last target is the last byte, read unsigned.
  const ByteTextDataset fours = ByteTextDataset::from_string(text, 4);
  REQUIRE(fours.size() == 11);
  REQUIRE(fours.get(10).target.to_vector<int64_t>() == std::vector<int64_t>{'.', '\n', 0xc3, 0xa9});

  write_bytes(dir.file("empty.txt"), {});
  REQUIRE(error_of([&] { ByteTextDataset::from_file(dir.file("empty.txt"), 8); }) ==
          "text file '" + dir.file("empty.txt") + "': the file is empty (0 bytes); there is no text to train on");
  REQUIRE(error_of([] { ByteTextDataset::from_string("", 8); }) ==
          "in-memory text: the string is empty; there is no text to train on");
  REQUIRE(error_of([] { ByteTextDataset::from_string("short", 8); }) ==
          "in-memory text: 5 tokens are fewer than one sample of block_size + 1 = 9 tokens; use more data or a smaller "
          "block_size");
}

TEST_CASE("tensor dataset: features and labels for the quick-start", "[engine][data]") {
  Generator gen(7);
  const Tensor features = normal({10, 768}, gen);
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto data = std::make_shared<TensorDataset>(features, labels);
  REQUIRE(data->size() == 10);
  DataLoader loader(data, {.micro_batch_size = 4, .shuffle = false});
  REQUIRE(loader.batches_per_epoch() == 2);
  std::vector<Batch> batches;
  for (const Batch& b : loader) batches.push_back(b);
  REQUIRE(batches.size() == 2);
  REQUIRE(batches[1].inputs.sizes() == Shape{4, 768});
  REQUIRE(batches[1].inputs.dtype() == DType::F32);
  REQUIRE(batches[1].targets.sizes() == Shape{4});
  REQUIRE(batches[1].targets.to_vector<int64_t>() == std::vector<int64_t>{4, 5, 6, 7});
  REQUIRE(batches[1].inputs.select(0, 2).to_vector<float>() == features.select(0, 6).to_vector<float>());

  REQUIRE(error_of([&] { TensorDataset(features, Tensor::zeros({9}, DType::I64)); }) ==
          "TensorDataset: inputs [10, 768] and targets [9] have different sample counts (first dimension 10 vs 9)");
}

TEST_CASE("shuffling is seeded, changes per epoch and is identical on every rank", "[engine][data]") {
  const std::vector<int64_t> a = epoch_order(1000, true, 1234, 0);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  REQUIRE(sorted == epoch_order(1000, false, 1234, 0));  // a permutation
  REQUIRE(a != sorted);
  REQUIRE(a == epoch_order(1000, true, 1234, 0));  // deterministic
  REQUIRE(a != epoch_order(1000, true, 1234, 1));  // a new order each epoch
  REQUIRE(a != epoch_order(1000, true, 1235, 0));  // and per seed

  // Four ranks: their micro-batches of each step tile the same global batch, which is the
  // single-rank loader's global batch.
  auto data = indexed_dataset(64);
  DataLoader single(data, {.micro_batch_size = 8, .shuffle = true, .seed = 99});
  for (int64_t step = 0; step < single.steps_per_epoch(); ++step) {
    std::vector<int64_t> tiled;
    for (int64_t rank = 0; rank < 4; ++rank) {
      DataLoader loader(data, {.micro_batch_size = 2, .dp_rank = rank, .dp_world_size = 4, .shuffle = true, .seed = 99});
      REQUIRE(loader.global_batch_indices(1, step) == single.global_batch_indices(1, step));
      const std::vector<int64_t> rows = loader.batch(1, step, 0).sample_index.to_vector<int64_t>();
      tiled.insert(tiled.end(), rows.begin(), rows.end());
    }
    REQUIRE(tiled == single.batch(1, step, 0).sample_index.to_vector<int64_t>());
  }
}

TEST_CASE("the sample map: same samples per step for every dp x gas, each once per epoch", "[engine][data]") {
  const int64_t n = 43;  // 5 full global batches of 8, and a tail of 3
  const int64_t global = 8;
  auto data = indexed_dataset(n);
  for (bool drop_last : {true, false}) {
    std::map<int64_t, std::multiset<int64_t>> reference;  // step -> samples, from dp = gas = 1
    for (int64_t dp : {1, 2, 4}) {
      for (int64_t gas : {1, 2}) {
        INFO("dp " << dp << ", gas " << gas << ", drop_last " << drop_last);
        const int64_t micro = global / (dp * gas);
        std::map<int64_t, std::multiset<int64_t>> per_step;
        std::multiset<int64_t> epoch;
        for (int64_t rank = 0; rank < dp; ++rank) {
          DataLoader loader(data, {.micro_batch_size = micro, .gradient_accumulation_steps = gas, .dp_rank = rank,
                                   .dp_world_size = dp, .shuffle = true, .seed = 5, .drop_last = drop_last});
          REQUIRE(loader.steps_per_epoch() == (drop_last ? 5 : 6));
          REQUIRE(loader.batches_per_epoch() == loader.steps_per_epoch() * gas);
          int64_t count = 0;
          for (const Batch& b : loader) {
            REQUIRE(b.step == count / gas);
            REQUIRE(b.micro_step == count % gas);
            REQUIRE(b.epoch == 0);
            if (b.step < 5) REQUIRE(b.rows() == micro);
            // The batch holds the samples its sample_index names.
            REQUIRE(b.inputs.to_vector<int64_t>() == b.sample_index.to_vector<int64_t>());
            for (int64_t index : b.sample_index.to_vector<int64_t>()) {
              per_step[b.step].insert(index);
              epoch.insert(index);
            }
            ++count;
          }
          REQUIRE(count == loader.batches_per_epoch());
        }
        if (dp == 1 && gas == 1) reference = per_step;
        REQUIRE(per_step == reference);
        // Every sample at most once; all of them when the tail is kept.
        REQUIRE(std::set<int64_t>(epoch.begin(), epoch.end()).size() == epoch.size());
        REQUIRE(static_cast<int64_t>(epoch.size()) == (drop_last ? 40 : n));
      }
    }
  }
}

TEST_CASE("the sample map: slot m*dp + r of a step, and the kept tail", "[engine][data]") {
  auto data = indexed_dataset(19);  // two global batches of 8, a tail of 3
  auto rows = [&](int64_t rank, int64_t step, int64_t micro_step) {
    DataLoader loader(data, {.micro_batch_size = 2, .gradient_accumulation_steps = 2, .dp_rank = rank,
                             .dp_world_size = 2, .shuffle = false, .drop_last = false});
    return loader.batch(0, step, micro_step).sample_index.to_vector<int64_t>();
  };
  using V = std::vector<int64_t>;
  // The table in docs/data.md.
  REQUIRE(rows(0, 0, 0) == V{0, 1});
  REQUIRE(rows(1, 0, 0) == V{2, 3});
  REQUIRE(rows(0, 0, 1) == V{4, 5});
  REQUIRE(rows(1, 0, 1) == V{6, 7});
  REQUIRE(rows(0, 1, 0) == V{8, 9});
  REQUIRE(rows(1, 1, 1) == V{14, 15});
  // The tail {16, 17, 18} over 4 slots: one each for slots 0..2, none for slot 3.
  REQUIRE(rows(0, 2, 0) == V{16});
  REQUIRE(rows(1, 2, 0) == V{17});
  REQUIRE(rows(0, 2, 1) == V{18});
  REQUIRE(rows(1, 2, 1).empty());
  DataLoader last(data, {.micro_batch_size = 2, .gradient_accumulation_steps = 2, .dp_rank = 1, .dp_world_size = 2,
                         .shuffle = false, .drop_last = false});
  const Batch empty = last.batch(0, 2, 1);
  REQUIRE(empty.inputs.sizes() == Shape{0, 1});
  REQUIRE(empty.targets.sizes() == Shape{0});
  REQUIRE(empty.loss_normaliser == Approx(3.0 / 4));
}

TEST_CASE("loss_normaliser: counted targets of the global batch over dp * gas", "[engine][data]") {
  SECTION("language modelling: every target counts") {
    auto data = std::make_shared<TokenDataset>(TokenDataset::from_tokens(iota_tokens(8 * 16 + 1), 16));
    for (int64_t dp : {1, 2, 4})
      for (int64_t gas : {1, 2}) {
        DataLoader loader(data, {.micro_batch_size = 8 / (dp * gas), .gradient_accumulation_steps = gas,
                                 .dp_rank = dp - 1, .dp_world_size = dp});
        for (const Batch& b : loader) {
          REQUIRE(b.inputs.sizes() == Shape{8 / (dp * gas), 16});
          REQUIRE(b.global_targets == 8 * 16);
          REQUIRE(b.loss_normaliser == static_cast<double>(8 * 16) / static_cast<double>(dp * gas));
        }
      }
  }
  SECTION("ignored targets are not counted, and the sum over micro-batches is the global mean") {
    // Sample i has targets [i, -100] for even i and [i, i] for odd i: 12 counted in 8 samples.
    std::vector<int64_t> targets;
    for (int64_t i = 0; i < 8; ++i) {
      targets.push_back(i);
      targets.push_back(i % 2 == 0 ? kIgnoreIndex : i);
    }
    auto data = std::make_shared<TensorDataset>(Tensor::arange(8, DType::F32).reshape({8, 1}),
                                                Tensor::from_vector(targets, {8, 2}));
    for (int64_t dp : {1, 2})
      for (int64_t gas : {1, 2, 4}) {
        // Per-target "loss" = target value; the engine's arithmetic: sum / normaliser per
        // micro-batch, / gas, averaged over dp ranks.
        double engine_loss = 0.0;
        for (int64_t rank = 0; rank < dp; ++rank) {
          DataLoader loader(data, {.micro_batch_size = 8 / (dp * gas), .gradient_accumulation_steps = gas,
                                   .dp_rank = rank, .dp_world_size = dp, .seed = 3});
          for (const Batch& b : loader) {
            REQUIRE(b.global_targets == 12);
            REQUIRE(b.loss_normaliser == 12.0 / static_cast<double>(dp * gas));
            double sum = 0.0;
            for (int64_t t : b.targets.to_vector<int64_t>())
              if (t != kIgnoreIndex) sum += static_cast<double>(t);
            engine_loss += sum / b.loss_normaliser / static_cast<double>(gas) / static_cast<double>(dp);
          }
        }
        const double mean = (0 + 2 + 4 + 6 + 2 * (1 + 3 + 5 + 7)) / 12.0;
        REQUIRE(engine_loss == Approx(mean).epsilon(1e-12));
      }
  }
  SECTION("a global batch with every target ignored has loss 0, not NaN") {
    auto data = std::make_shared<TensorDataset>(Tensor::zeros({4, 1}), Tensor::full({4}, -100, DType::I64));
    DataLoader loader(data, {.micro_batch_size = 2, .dp_world_size = 2});
    REQUIRE(loader.batch(0, 0, 0).global_targets == 0);
    REQUIRE(loader.batch(0, 0, 0).loss_normaliser == 0.5);
  }
}

TEST_CASE("state save / restore resumes at the same batch", "[engine][data]") {
  auto data = indexed_dataset(40);
  const DataLoaderOptions options{.micro_batch_size = 2, .gradient_accumulation_steps = 2, .dp_rank = 1,
                                  .dp_world_size = 2, .shuffle = true, .seed = 11};
  // The uninterrupted run: two epochs.
  DataLoader full(data, options);
  REQUIRE(full.steps_per_epoch() == 5);
  std::vector<std::vector<int64_t>> reference;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (const Batch& b : full) reference.push_back(b.sample_index.to_vector<int64_t>());
  REQUIRE(reference.size() == 20);
  REQUIRE(full.state() == DataLoaderState{2, 0});

  // Stop after 3 optimizer steps of epoch 1 (micro-batches 10..15 consumed), checkpoint, resume.
  DataLoader first(data, options);
  DataLoaderState saved;
  int64_t consumed = 0;
  for (int epoch = 0; epoch < 2 && consumed < 16; ++epoch)
    for (const Batch& b : first) {
      ++consumed;
      if (consumed == 16) {
        REQUIRE(b.micro_step == 1);
        saved = first.state();
        break;
      }
    }
  REQUIRE(saved == DataLoaderState{1, 3});

  DataLoader resumed(data, options);
  resumed.load_state(saved);
  std::vector<std::vector<int64_t>> rest;
  for (const Batch& b : resumed) rest.push_back(b.sample_index.to_vector<int64_t>());
  REQUIRE(rest == std::vector<std::vector<int64_t>>(reference.begin() + 16, reference.end()));

  // A state taken mid-step names that step: resuming replays it from micro-step 0.
  DataLoader mid(data, options);
  auto it = mid.begin();  // micro-batch 0 handed out
  ++it;
  ++it;  // micro-batch 2 handed out: step 1, micro-step 0 — step 1 is not complete
  REQUIRE(it->step == 1);
  REQUIRE(it->micro_step == 0);
  REQUIRE(mid.state() == DataLoaderState{0, 1});
  ++it;  // step 1, micro-step 1 handed out: step 1 is complete
  REQUIRE(mid.state() == DataLoaderState{0, 2});

  // The end of an epoch is the start of the next; set_epoch jumps.
  resumed.load_state({0, 5});
  REQUIRE(resumed.state() == DataLoaderState{1, 0});
  resumed.set_epoch(7);
  REQUIRE(resumed.begin()->epoch == 7);
  REQUIRE(error_of([&] { resumed.load_state({0, 6}); }) ==
          "DataLoader::load_state: epoch 0, step 6 is not a position of this loader (5 steps per epoch); the "
          "checkpoint was written with another dataset or batch size — resume with the same dataset, micro_batch_size "
          "x gradient_accumulation_steps x dp_world_size, and drop_last");
}

TEST_CASE("data loader: bad settings name the parameter and the fix", "[engine][data]") {
  auto data = indexed_dataset(10);
  REQUIRE(error_of([&] { DataLoader(data, {.micro_batch_size = 0}); }) ==
          "DataLoader: micro_batch_size is 0; it must be at least 1");
  REQUIRE(error_of([&] { DataLoader(data, {.gradient_accumulation_steps = 0}); }) ==
          "DataLoader: gradient_accumulation_steps is 0; it must be at least 1");
  REQUIRE(error_of([&] { DataLoader(data, {.dp_rank = 2, .dp_world_size = 2}); }) ==
          "DataLoader: dp_rank 2 is outside the data-parallel world of 2 ranks (valid ranks: 0..1)");
  REQUIRE(error_of([&] { DataLoader(data, 2, 3, 0, 2); }) ==
          "DataLoader: the dataset has 10 samples, fewer than one global batch of 12 (micro_batch_size 2 x "
          "gradient_accumulation_steps 3 x dp_world_size 2), so drop_last leaves no steps; use smaller batches, more "
          "data, or drop_last = false");
  REQUIRE(DataLoader(data, 2, 3, 0, 2, true, 0, false).steps_per_epoch() == 1);
  REQUIRE(error_of([&] { DataLoader(nullptr, {}); }) ==
          "DataLoader: the dataset is null; pass a std::shared_ptr to a Dataset");
  DataLoader loader(data, {.micro_batch_size = 5});
  REQUIRE(error_of([&] { loader.batch(0, 2, 0); }) == "DataLoader: step 2 is outside the epoch's 2 steps (valid: 0..1)");
}
