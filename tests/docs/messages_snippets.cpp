// The error messages the docs show, verbatim (docs_check compares the raw strings below with the
// pages), each produced here by the input that causes it. A shown line ending in " ..." stands for
// a longer message with that beginning; a message wrapped over several lines is one line here.
#include <catch2/catch.hpp>
#include <fathom.h>

#include <sstream>

#include "docs_sandbox.h"
#include "engine/loss_scaler.h"
#include "engine/data/token_dataset.h"
#include "engine/data/token_file.h"

namespace fathom {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string joined(const std::string& wrapped) {
  std::string out;
  for (const std::string& line : lines_of(wrapped)) out += (out.empty() ? "" : " ") + line;
  return out;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "<no error>";
}

// `shown` is the doc's line: the whole message, or its beginning followed by " ...".
void check_shown(const std::string& shown, const std::string& actual) {
  INFO("the doc shows: " << shown);
  INFO("the code says: " << actual);
  const bool elided = shown.size() > 4 && shown.compare(shown.size() - 4, 4, " ...") == 0;
  CHECK((elided ? actual.rfind(shown.substr(0, shown.size() - 4), 0) == 0 : actual == shown));
}

}  // namespace

TEST_CASE("core.md: shape errors", "[docs]") {
  const std::vector<std::string> shown = lines_of(R"(
add: shapes [4, 64, 768] and [512, 10] cannot be broadcast (dim 1: 64 vs 512)
view: cannot view a tensor of shape [2, 4, 3] and strides [12, 1, 4] as [24] without copying; use reshape() (copies when needed) or contiguous() first
)");
  REQUIRE(shown.size() == 2);
  check_shown(shown[0], message_of([] { add(Tensor::zeros({4, 64, 768}), Tensor::zeros({512, 10})); }));
  check_shown(shown[1], message_of([] { Tensor::zeros({2, 3, 4}).transpose(1, 2).view({24}); }));
}

TEST_CASE("autograd.md: a saved tensor modified in place", "[docs]") {
  const std::string shown = joined(R"(
backward of exp_backward: output 0 was modified by an in-place operation after it was saved
(version 2, saved at version 1); clone() it before modifying it, or use the out-of-place op
)");
  autograd::Variable x(Tensor::ones({2}), true);
  autograd::Variable y = autograd::exp(x);
  y.data().fill_(2.0);
  check_shown(shown, message_of([&] { autograd::sum(y).backward(); }));
}

TEST_CASE("config.md: config errors", "[docs]") {
  const std::vector<std::string> shown = lines_of(R"(
ds_config.json:7: config error at optimizer.params.wieght_decay: AdamW: unknown optimizer parameter "wieght_decay"; did you mean "weight_decay"? ...
ds_config.json:3: config error at zero_optimization.stgae: unknown key; did you mean "stage"?
config error at train_batch_size: expected an integer >= 1, got the string "8"; write 8 without quotes
config error at gradient_clipping: "auto" is a placeholder that a program fills in from its own settings (the Hugging Face Trainer; fathom-train fills the usual ones), not the library; write a number >= 0
config error: train_batch_size (32) != train_micro_batch_size_per_gpu (8) * gradient_accumulation_steps (2) * data-parallel world size (4) = 64
)");
  REQUIRE(shown.size() == 5);
  docs_test::Sandbox sandbox("config_messages");
  docs_test::Sandbox::write("ds_config.json", "{\n  \"train_batch_size\": 8,\n  \"optimizer\": {\n    \"type\": \"AdamW\",\n"
                                              "    \"params\": {\n      \"lr\": 3e-4,\n      \"wieght_decay\": 0.1\n"
                                              "    }\n  }\n}\n");
  check_shown(shown[0], message_of([] { Config::from_file("ds_config.json"); }));
  docs_test::Sandbox::write("ds_config.json", "{\n  \"train_batch_size\": 8,\n  \"zero_optimization\": {\"stgae\": 2}\n}\n");
  check_shown(shown[1], message_of([] { Config::from_file("ds_config.json"); }));
  check_shown(shown[2], message_of([] { Config::from_string(R"({"train_batch_size": "8"})"); }));
  check_shown(shown[3], message_of([] { Config::from_string(R"({"train_batch_size": 8, "gradient_clipping": "auto"})"); }));
  check_shown(shown[4], message_of([] {
    Config::from_string(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2})")
        .resolve_batch(4);
  }));
}

TEST_CASE("data.md: a token outside the vocabulary", "[docs]") {
  const std::string shown = joined(R"(
token file 'train.bin': token offset 37 (byte 1098) holds token id 60000, outside the vocabulary
of 50257 ids (0..50256); the data was tokenised with a different tokenizer, or vocab_size is wrong
)");
  docs_test::Sandbox sandbox("data_messages");
  std::vector<uint16_t> tokens(100, 7);
  tokens[37] = 60000;
  write_token_file("train.bin", tokens, TokenFileFormat::LlmC);
  check_shown(shown, message_of([] { TokenDataset::from_file("train.bin", 8, {.vocab_size = 50257}); }));
}

TEST_CASE("mixed_precision.md: the minimum-scale error", "[docs]") {
  const std::string shown = joined(R"(
fp16 overflow at the minimum loss scale (1) with hysteresis exhausted, at optimizer step 17: the
gradients overflow even unscaled, which usually means training has diverged (DeepSpeed stops here
too); train in bf16 ("bf16": {"enabled": true}), or resume from an earlier checkpoint with a lower
lr or gradient clipping ("gradient_clipping": 1.0)
)");
  // A scale of 2^4 and no hysteresis to spend: every step from the 14th overflows, the scale halves
  // down to the minimum, and the overflow after that is the error.
  LossScaler scaler({.initial_scale_power = 4, .hysteresis = 1, .min_loss_scale = 1});
  std::string message = "<no error>";
  for (int step = 1; step <= 100 && message == "<no error>"; ++step)
    message = message_of([&] { scaler.update(step >= 14); });
  check_shown(shown, message);
}

}  // namespace fathom
