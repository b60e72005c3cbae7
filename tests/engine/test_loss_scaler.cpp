// fp16 loss scaling against DeepSpeed v0.16's own DynamicLossScaler: every trajectory in
// tests/data/loss_scaler_reference.json (written by tests/data/generate_loss_scaler.py) is
// replayed step by step, plus the errors DeepSpeed has no equivalent for.

#include <catch2/catch.hpp>

#include "test_util.h"
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>

#include "core/error.h"
#include "engine/config/config.h"
#include "engine/loss_scaler.h"
#include "core/json.h"

using namespace fathom;

using fathom::testing::error_of;

namespace {

const JsonValue& reference() {
  static const JsonValue value = [] {
    const std::string path = std::string(FATHOM_TEST_DATA_DIR) + "/loss_scaler_reference.json";
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    const std::string text(std::istreambuf_iterator<char>(in), {});
    return parse_json(text, path);
  }();
  return value;
}

LossScalerOptions options_of(const JsonValue& o) {
  LossScalerOptions options;
  options.loss_scale = o.at("loss_scale").as_double();
  options.initial_scale_power = o.at("initial_scale_power").as_int64();
  options.loss_scale_window = o.at("loss_scale_window").as_int64();
  options.hysteresis = o.at("hysteresis").as_int64();
  options.consecutive_hysteresis = o.at("consecutive_hysteresis").as_bool();
  options.min_loss_scale = o.at("min_loss_scale").as_double();
  return options;
}

const std::string kMinScaleAt1 =
    "fp16 overflow at the minimum loss scale (1) with hysteresis exhausted, at optimizer step STEP: the gradients "
    "overflow even unscaled, which usually means training has diverged (DeepSpeed stops here too); train in bf16 "
    "(\"bf16\": {\"enabled\": true}), or resume from an earlier checkpoint with a lower lr or gradient clipping "
    "(\"gradient_clipping\": 1.0)";

std::string min_scale_message(const LossScalerOptions& options, int64_t step) {
  std::string text = kMinScaleAt1;
  text.replace(text.find("STEP"), 4, std::to_string(step));
  if (options.min_loss_scale == 1) return text;
  // The reference cases use minima 3 and 0.25; both print exactly in shortest form.
  const std::string min = options.min_loss_scale == 3 ? "3" : "0.25";
  text.replace(text.find("scale (1)"), 9, "scale (" + min + ")");
  text.replace(text.find("even unscaled"), 13, "even at scale " + min);
  if (options.min_loss_scale > 1) text += ", or lower fp16.min_loss_scale";
  return text;
}

}  // namespace

TEST_CASE("loss scaler reference data comes from DeepSpeed 0.16.0's loss_scaler.py", "[engine]") {
  const JsonValue& ref = reference();
  CHECK(ref.at("deepspeed_version").as_string() == "0.16.0");
  CHECK(ref.at("source").as_string() == "deepspeed/runtime/fp16/loss_scaler.py");
  // sha256 of that file in the deepspeed-0.16.0 sdist: a regenerated file from other code shows up here.
  CHECK(ref.at("source_sha256").as_string() == "dd28cf3ca49e4489ac299f9f2105aaa23dd697b84adcdcf626718b1a741a4512");
  CHECK(ref.at("cases").as_array().size() >= 30);
}

TEST_CASE("loss scaler replays every DeepSpeed trajectory exactly", "[engine]") {
  for (const JsonValue& c : reference().at("cases").as_array()) {
    const std::string name = c.at("name").as_string();
    INFO("case: " << name);
    const LossScalerOptions options = options_of(c.at("options"));
    LossScaler scaler(options);
    const std::string pattern = c.at("overflows").as_string();
    const auto& scales = c.at("scale").as_array();
    const bool dynamic = options.loss_scale == 0;
    REQUIRE(scaler.dynamic() == dynamic);
    const int64_t raises_at = c.at("raises_at").is_null() ? -1 : c.at("raises_at").as_int64();
    const size_t steps = raises_at >= 0 ? static_cast<size_t>(raises_at) : pattern.size();
    REQUIRE(scales.size() == steps);
    int64_t overflows = 0;
    for (size_t i = 0; i < steps; ++i) {
      INFO("step " << i);
      const bool overflow = pattern[i] == '1';
      scaler.update(overflow);
      overflows += overflow;
      // Exact: DeepSpeed's arithmetic is halving, doubling and clamping, all exact in double.
      REQUIRE(scaler.scale() == scales[i].as_double());
      REQUIRE(scaler.overflows() == overflows);
      REQUIRE(scaler.skipped_steps() == overflows);
      REQUIRE(scaler.cur_iter() == static_cast<int64_t>(i) + 1);
      if (dynamic) {
        REQUIRE(scaler.cur_hysteresis() == c.at("hysteresis").as_array()[i].as_int64());
        REQUIRE(scaler.cur_iter() == c.at("cur_iter").as_array()[i].as_int64());
        REQUIRE(scaler.last_overflow_iter() == c.at("last_overflow_iter").as_array()[i].as_int64());
      }
    }
    if (raises_at >= 0) {
      // Where DeepSpeed raises "Current loss scale already at minimum", Fathom throws its own
      // message and leaves the scaler untouched.
      REQUIRE(pattern[steps] == '1');
      REQUIRE(scaler.scale() == options.min_loss_scale);
      const LossScalerState before = scaler.state();
      CHECK(error_of([&] { scaler.update(true); }) == min_scale_message(options, raises_at));
      CHECK(scaler.state() == before);
    } else {
      CHECK(c.at("deepspeed_error").is_null());
    }
  }
}

TEST_CASE("loss scaler throws at the minimum only with hysteresis exhausted", "[engine]") {
  LossScalerOptions options;
  options.initial_scale_power = 0;  // starts at the minimum, 1
  options.hysteresis = 3;
  options.consecutive_hysteresis = true;
  LossScaler scaler(options);
  scaler.update(true);  // 3 -> 2
  scaler.update(true);  // 2 -> 1
  CHECK(scaler.cur_hysteresis() == 1);
  CHECK(scaler.scale() == 1);
  scaler.update(false);  // consecutive_hysteresis refills to 3
  CHECK(scaler.cur_hysteresis() == 3);
  scaler.update(true);
  scaler.update(true);
  CHECK(scaler.cur_hysteresis() == 1);
  CHECK(error_of([&] { scaler.update(true); }) == min_scale_message(options, 5));
  CHECK(scaler.cur_iter() == 5);
  CHECK(scaler.overflows() == 4);

  // Above the minimum, an overflow with hysteresis exhausted halves (clamped) instead.
  LossScalerOptions clamp;
  clamp.initial_scale_power = 2;
  clamp.hysteresis = 1;
  clamp.min_loss_scale = 3;
  LossScaler clamped(clamp);
  clamped.update(true);
  CHECK(clamped.scale() == 3);
  CHECK(error_of([&] { clamped.update(true); }) == min_scale_message(clamp, 1));
}

TEST_CASE("static loss scale never changes and never throws", "[engine]") {
  LossScalerOptions options;
  options.loss_scale = 1;
  options.min_loss_scale = 1;
  LossScaler scaler(options);
  CHECK_FALSE(scaler.dynamic());
  for (int i = 0; i < 50; ++i) scaler.update(i % 3 != 0);
  CHECK(scaler.scale() == 1);
  CHECK(scaler.overflows() == 33);
  CHECK(scaler.skipped_steps() == 33);
  CHECK(scaler.cur_iter() == 50);
  CHECK(scaler.last_overflow_iter() == 49);

  options.loss_scale = 0.5;  // a static scale is not bound by min_loss_scale
  CHECK(LossScaler(options).scale() == 0.5);
}

TEST_CASE("loss scaler options from the fp16 config", "[engine]") {
  Fp16Config fp16;
  LossScalerOptions defaults = from_config(fp16);
  CHECK(defaults.loss_scale == 0);
  CHECK(defaults.initial_scale_power == 16);
  CHECK(defaults.loss_scale_window == 1000);
  CHECK(defaults.hysteresis == 2);
  CHECK_FALSE(defaults.consecutive_hysteresis);
  CHECK(defaults.min_loss_scale == 1);
  CHECK(LossScaler(defaults).scale() == 65536);

  fp16.loss_scale = 0;
  fp16.initial_scale_power = 32;
  fp16.loss_scale_window = 7;
  fp16.hysteresis = 4;
  fp16.consecutive_hysteresis = true;
  fp16.min_loss_scale = 0.5;
  const LossScalerOptions o = from_config(fp16);
  CHECK(o.initial_scale_power == 32);
  CHECK(o.loss_scale_window == 7);
  CHECK(o.hysteresis == 4);
  CHECK(o.consecutive_hysteresis);
  CHECK(o.min_loss_scale == 0.5);
  LossScaler scaler(o);
  CHECK(scaler.scale() == 4294967296.0);
  CHECK(scaler.cur_hysteresis() == 4);
}

TEST_CASE("bad loss scaler options name the option, the value and the fix", "[engine]") {
  auto error = [](auto edit) {
    LossScalerOptions options;
    edit(options);
    return error_of([&] { LossScaler scaler(options); });
  };
  CHECK(error([](LossScalerOptions& o) { o.loss_scale = -1; }) ==
        "fp16.loss_scale must be a finite number >= 0, got -1: use 0 for dynamic loss scaling or a positive static "
        "scale such as 128");
  CHECK(error([](LossScalerOptions& o) { o.loss_scale = std::numeric_limits<double>::infinity(); }) ==
        "fp16.loss_scale must be a finite number >= 0, got inf: use 0 for dynamic loss scaling or a positive static "
        "scale such as 128");
  CHECK(error([](LossScalerOptions& o) { o.initial_scale_power = -1; }) ==
        "fp16.initial_scale_power must be an integer in [0, 127], got -1: the first dynamic scale is "
        "2^initial_scale_power and must stay a finite float32; DeepSpeed's default is 16");
  CHECK(error([](LossScalerOptions& o) { o.initial_scale_power = 128; }) ==
        "fp16.initial_scale_power must be an integer in [0, 127], got 128: the first dynamic scale is "
        "2^initial_scale_power and must stay a finite float32; DeepSpeed's default is 16");
  CHECK(error([](LossScalerOptions& o) { o.loss_scale_window = 0; }) ==
        "fp16.loss_scale_window must be >= 1, got 0: it is the number of clean steps before the scale doubles; "
        "DeepSpeed's default is 1000");
  CHECK(error([](LossScalerOptions& o) { o.hysteresis = 0; }) ==
        "fp16.hysteresis must be >= 1, got 0: it is the number of overflows tolerated before the scale halves "
        "(1 = halve on every overflow); DeepSpeed's default is 2");
  CHECK(error([](LossScalerOptions& o) { o.hysteresis = -2; }) ==
        "fp16.hysteresis must be >= 1, got -2: it is the number of overflows tolerated before the scale halves "
        "(1 = halve on every overflow); DeepSpeed's default is 2");
  CHECK(error([](LossScalerOptions& o) { o.min_loss_scale = 0; }) ==
        "fp16.min_loss_scale must be a finite number > 0, got 0: a zero scale would zero every gradient; "
        "DeepSpeed's default is 1");
  CHECK(error([](LossScalerOptions& o) { o.min_loss_scale = -1; }) ==
        "fp16.min_loss_scale must be a finite number > 0, got -1: a zero scale would zero every gradient; "
        "DeepSpeed's default is 1");
  CHECK(error([](LossScalerOptions& o) {
          o.initial_scale_power = 1;
          o.min_loss_scale = 4;
        }) == "fp16 initial loss scale 2^1 = 2 is below fp16.min_loss_scale (4): an overflow would raise the scale; "
              "raise initial_scale_power or lower min_loss_scale");
  // The same minimum is fine for a static scale, which never reaches for it.
  CHECK(error([](LossScalerOptions& o) {
          o.loss_scale = 2;
          o.min_loss_scale = 4;
        }) == "(no error)");
}

TEST_CASE("loss scaler state round trip resumes the same trajectory", "[engine]") {
  LossScalerOptions options;
  options.initial_scale_power = 10;
  options.loss_scale_window = 4;
  options.hysteresis = 3;
  const std::string pattern = "1100100000110111000001101000000111100000";
  LossScaler straight(options);
  LossScaler first(options);
  for (size_t i = 0; i < 17; ++i) {
    straight.update(pattern[i] == '1');
    first.update(pattern[i] == '1');
  }
  const LossScalerState saved = first.state();
  CHECK(saved.dynamic);
  CHECK(saved.cur_iter == 17);
  LossScaler resumed(options);
  resumed.load_state(saved);
  CHECK(resumed.state() == saved);
  for (size_t i = 17; i < pattern.size(); ++i) {
    straight.update(pattern[i] == '1');
    resumed.update(pattern[i] == '1');
    REQUIRE(resumed.state() == straight.state());
  }

  LossScalerOptions fixed;
  fixed.loss_scale = 128;
  LossScaler static_scaler(fixed);
  static_scaler.update(true);
  static_scaler.update(false);
  LossScaler static_resumed(fixed);
  static_resumed.load_state(static_scaler.state());
  CHECK(static_resumed.state() == static_scaler.state());
}

TEST_CASE("loss scaler load_state rejects a state these options could not produce", "[engine]") {
  LossScalerOptions options;
  options.hysteresis = 2;
  options.min_loss_scale = 2;
  LossScaler scaler(options);
  const LossScalerState good = scaler.state();
  auto error = [&](auto edit) {
    LossScalerState s = good;
    edit(s);
    return error_of([&] { scaler.load_state(s); });
  };
  CHECK(error([](LossScalerState& s) { s.dynamic = false; }) ==
        "loss scaler checkpoint is static but fp16.loss_scale (0) makes this run dynamic: set fp16.loss_scale as in "
        "the run that wrote the checkpoint (0 = dynamic)");
  CHECK(error([](LossScalerState& s) { s.scale = 1; }) ==
        "loss scaler checkpoint has scale 1, below fp16.min_loss_scale (2) or not finite: set min_loss_scale as in "
        "the run that wrote the checkpoint");
  CHECK(error([](LossScalerState& s) { s.cur_hysteresis = 3; }) ==
        "loss scaler checkpoint has cur_hysteresis 3, outside [1, fp16.hysteresis = 2]: set hysteresis as in the "
        "run that wrote the checkpoint (or higher)");
  CHECK(error([](LossScalerState& s) { s.last_overflow_iter = 0; }) ==
        "loss scaler checkpoint is inconsistent: cur_iter 0, last_overflow_iter 0 (expected 0 <= cur_iter and "
        "-1 <= last_overflow_iter < cur_iter)");
  CHECK(error([](LossScalerState& s) {
          s.cur_iter = 3;
          s.overflows = 4;
        }) == "loss scaler checkpoint is inconsistent: 4 overflows and 0 skipped steps in 3 steps (expected 0 <= each "
              "<= cur_iter)");
  CHECK(scaler.state() == good);  // nothing changed by the failed loads

  LossScalerOptions fixed;
  fixed.loss_scale = 128;
  LossScaler static_scaler(fixed);
  LossScalerState other = static_scaler.state();
  other.scale = 64;
  CHECK(error_of([&] { static_scaler.load_state(other); }) ==
        "loss scaler checkpoint has static scale 64 but fp16.loss_scale is 128: set fp16.loss_scale to the "
        "checkpoint's value to resume the same run");
  other = static_scaler.state();
  other.dynamic = true;
  CHECK(error_of([&] { static_scaler.load_state(other); }) ==
        "loss scaler checkpoint is dynamic but fp16.loss_scale (128) makes this run static: set fp16.loss_scale as "
        "in the run that wrote the checkpoint (0 = dynamic)");
}
