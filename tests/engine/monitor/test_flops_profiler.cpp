// The flops profiler: the decoder's (GPT-2's configuration) counted forward work against the closed form of the counting
// convention (kernels/op_registry.h, OpCost), the module tree's parameters, and the printout
// the engine writes at profile_step.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/monitor/flops_profiler.h"
#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "nn/loss.h"

using namespace fathom;
namespace fs = std::filesystem;

namespace {
struct Counted {
  int64_t macs, flops;
};

// The tiny GPT-2 with a 64-token vocabulary and 16-token sequences, and 8 of its sequences.
models::DecoderConfig small_tiny_gpt() {
  models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
  c.vocab_size = 64;
  c.max_positions = 16;
  return c;
}
std::shared_ptr<TokenDataset> eight_sequences() {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 8 * 17 + 1; ++i) tokens.push_back(static_cast<uint16_t>(i * 5 % 61));
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, 16, 64));
}

// GPT-2's forward (biases, no dropout, tied head) by the convention: matmuls M·N·K MACs and twice
// that in flops, causal attention's two T×T products whole and its softmax one flop per score,
// layernorm 5 flops an element, GELU, the biases and the residual and embedding additions 1.
Counted closed_form(const models::DecoderConfig& c, int64_t B, int64_t T) {
  const int64_t C = c.hidden_size, L = c.n_layer, V = c.vocab_size, H = c.n_head;
  const int64_t per_layer_macs = B * T * C * 3 * C   // qkv projection
                                 + 2 * B * T * T * C  // q kᵀ and p v over all heads
                                 + B * T * C * C      // attention output projection
                                 + 2 * B * T * C * 4 * C;  // MLP up and down
  const int64_t macs = L * per_layer_macs + B * T * C * V;  // + the LM head
  const int64_t per_layer_other = B * H * T * T   // softmax
                                  + 2 * 5 * B * T * C  // two layernorms
                                  + 2 * B * T * C      // two residual additions
                                  + 9 * B * T * C      // the biases of qkv (3C), the projections (C, C), fc (4C)
                                  + B * T * 4 * C;     // GELU
  const int64_t flops = 2 * macs + L * per_layer_other + B * T * C /* token + position */ + 5 * B * T * C /* ln_f */;
  return {macs, flops};
}

Tensor token_ids(int64_t B, int64_t T, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < B * T; ++i) ids.push_back(i * 7 % vocab);
  return Tensor::from_vector(ids, {B, T});
}
}  // namespace

TEST_CASE("GPT's counted forward MACs and flops equal the convention's closed form, either attention kernel", "[engine]") {
  for (nn::AttentionKernel kernel : {nn::AttentionKernel::Fused, nn::AttentionKernel::Gemm}) {
    models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
    c.vocab_size = 96;
    c.max_positions = 16;
    c.attention = kernel;
    models::Decoder gpt(c, 1);
    FlopsProfiler profiler(gpt, {}, {});
    const int64_t B = 3, T = 12;  // T below block_size: the count follows the input, not the config
    profiler.start();
    gpt(autograd::Variable(token_ids(B, T, c.vocab_size)));
    profiler.stop();
    gpt(autograd::Variable(token_ids(B, T, c.vocab_size)));  // not counted: the hooks are gone
    const Counted expected = closed_form(c, B, T);
    INFO((kernel == nn::AttentionKernel::Fused ? "fused" : "gemm") << " attention");
    CHECK(profiler.total_macs() == expected.macs);
    CHECK(profiler.total_flops() == expected.flops);
    CHECK(profiler.forward_ms() > 0);
  }
}

TEST_CASE("the module tree's parameters add up to the model's, the tied head counted once", "[engine]") {
  models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
  models::Decoder gpt(c, 1);
  FlopsProfiler profiler(gpt, {}, {});
  const std::vector<ModuleProfile>& modules = profiler.modules();
  CHECK(profiler.total_params() == gpt.parameter_count());
  CHECK(profiler.total_params() == c.parameter_count());
  int64_t own = 0;
  for (const ModuleProfile& m : modules) own += m.params;
  CHECK(own == gpt.parameter_count());
  // Every module's total is its own parameters plus its children's totals.
  for (size_t m = 0; m < modules.size(); ++m) {
    int64_t children = 0;
    for (size_t child : modules[m].children) children += profiler.total_params(child);
    CHECK(profiler.total_params(m) == modules[m].params + children);
  }
  CHECK(modules.size() == gpt.named_modules().size());
}

TEST_CASE("the engine prints DeepSpeed's summary, the top modules and the tree at profile_step", "[engine]") {
  const fs::path file = fs::temp_directory_path() / "fathom_flops_profile.txt";
  fs::remove(file);
  const Config config = Config::from_string(R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW"}, "flops_profiler": {"enabled": true, "profile_step": 1, "top_modules": 2,
      "output_file": ")" + file.string() + R"("}})");
  const models::DecoderConfig c = small_tiny_gpt();
  const auto data = eight_sequences();
  Initialized init = initialize(config, std::make_shared<models::Decoder>(c, 1), nullptr, data);
  for (const Batch& batch : *init.loader) {
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs)), batch.targets,
                                            batch.loss_normaliser));
    init.engine->step();
    if (init.engine->global_steps() == 1) CHECK(!fs::exists(file));  // step 1 is the warm-up
  }
  REQUIRE(fs::exists(file));
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  const std::string profile = text.str();
  CHECK(profile.find("Profile summary at step 2 (profile_step 1") != std::string::npos);
  CHECK(profile.find("batch size per rank:") != std::string::npos);
  const Counted expected = closed_form(c, 2, 16);  // one micro-batch of 2 sequences of 16
  CHECK(profile.find("fwd MACs per rank:") != std::string::npos);
  CHECK(profile.find(format_count(static_cast<double>(expected.macs), "MACs")) != std::string::npos);
  CHECK(profile.find("bwd FLOPS per rank = 2 * fwd flops per rank / bwd latency:") != std::string::npos);
  CHECK(profile.find("depth 4:") != std::string::npos);
  CHECK(profile.find("    MACs        - {DecoderMLP: ") != std::string::npos);  // the larger of the two depth-4 types
  CHECK(profile.find("(up_proj): Linear(") != std::string::npos);
  CHECK(profile.find("100.00% Params") != std::string::npos);
}

TEST_CASE("the profiler's number formats are DeepSpeed's", "[engine]") {
  CHECK(format_count(124439808) == "124.44 M");
  CHECK(format_count(43.5e9, "MACs") == "43.5 GMACs");
  CHECK(format_count(0, "FLOPS") == "0 FLOPS");
  CHECK(format_count(512) == "512");
  CHECK(format_seconds(0.12034) == "120.34 ms");
  CHECK(format_seconds(3.4e-5) == "34 us");
  CHECK(format_seconds(2.5) == "2.5 s");
}

TEST_CASE("an output file or trace folder that cannot be made is an error before training, naming the key", "[engine]") {
  // A regular file where a folder would have to be.
  const fs::path blocker = fs::temp_directory_path() / "fathom_profile_blocker";
  std::ofstream(blocker) << "a file";
  models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
  const auto model = std::make_shared<models::Decoder>(c, 1);
  const auto configured = [&](const std::string& section) {
    return Config::from_string(R"({"train_batch_size": 2, "optimizer": {"type": "AdamW"}, )" + section + "}");
  };
  CHECK_THROWS_WITH(
      initialize(configured(R"("flops_profiler": {"enabled": true, "output_file": ")" + (blocker / "p.txt").string() +
                            R"("})"),
                 model),
      Catch::Contains("flops_profiler: cannot create " + blocker.string()) && Catch::EndsWith("check output_file"));
  CHECK_THROWS_WITH(
      initialize(configured(R"("trace": {"enabled": true, "output_path": ")" + (blocker / "t").string() + R"("})"),
                 model),
      Catch::Contains("trace: cannot create " + (blocker / "t").string()) && Catch::EndsWith("check output_path"));
}

TEST_CASE("a profile or trace file that cannot be written is an error at the step that writes it, naming it",
          "[engine]") {
  // A folder where the file would go: the folder exists, so initialize accepts it; the write fails.
  const fs::path dir = fs::temp_directory_path() / "fathom_unwritable_outputs";
  fs::remove_all(dir);
  fs::create_directories(dir / "profile.txt");
  fs::create_directories(dir / "trace.json");
  const models::DecoderConfig c = small_tiny_gpt();
  const auto data = eight_sequences();
  const auto train = [&](const std::string& section) {
    const Config config = Config::from_string(
        R"({"train_batch_size": 2, "optimizer": {"type": "AdamW"}, )" + section + "}");
    Initialized init = initialize(config, std::make_shared<models::Decoder>(c, 1), nullptr, data);
    for (const Batch& batch : *init.loader) {
      init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs)), batch.targets,
                                              batch.loss_normaliser));
      init.engine->step();
      if (init.engine->global_steps() == 3) break;
    }
  };
  CHECK_THROWS_WITH(train(R"("flops_profiler": {"enabled": true, "profile_step": 1, "output_file": ")" +
                          (dir / "profile.txt").string() + R"("})"),
                    Catch::Contains("flops_profiler: cannot write output_file " + (dir / "profile.txt").string()));
  CHECK_THROWS_WITH(train(R"("trace": {"enabled": true, "steps": [1, 1], "output_path": ")" + dir.string() + R"("})"),
                    Catch::Contains("trace: cannot write " + (dir / "trace.json").string()) &&
                        Catch::Contains("check output_path"));
  fs::remove_all(dir);
}
