// LR schedules against DeepSpeed v0.16's own lr_schedules.py: every recorded lr (and OneCycle
// beta) in tests/data/lr_schedules_reference.json, written by tests/data/generate_lr_schedules.py.

#include <catch2/catch.hpp>

#include "test_util.h"
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/json.h"
#include "nn/lr_schedule.h"
#include "nn/one_cycle.h"
#include "nn/warmup_lr.h"

using namespace fathom;
using namespace fathom::nn;

using fathom::testing::error_of;

namespace {

const JsonValue& reference() {
  static const JsonValue value = [] {
    const std::string path = std::string(FATHOM_TEST_DATA_DIR) + "/lr_schedules_reference.json";
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    const std::string text(std::istreambuf_iterator<char>(in), {});
    return parse_json(text, path);
  }();
  return value;
}

LRParamMap params_of(const JsonValue& object) {
  LRParamMap params;
  for (const auto& [name, value] : object.as_object()) {
    if (value.is_integer()) params.emplace(name, value.as_int64());
    else if (value.is_number()) params.emplace(name, value.as_double());
    else if (value.is_bool()) params.emplace(name, value.as_bool());
    else params.emplace(name, value.as_string());
  }
  return params;
}

std::vector<double> doubles(const JsonValue& array) {
  std::vector<double> out;
  for (const JsonValue& v : array.as_array()) out.push_back(v.as_double());
  return out;
}

// |a - b| <= atol + rtol * |b|; returns "" or a description of the first mismatch.
std::string compare(const std::vector<double>& actual, const std::vector<double>& expected, const std::string& what) {
  constexpr double kAtol = 1e-18, kRtol = 1e-12;
  if (actual.size() != expected.size())
    return what + ": " + std::to_string(actual.size()) + " values, expected " + std::to_string(expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::fabs(actual[i] - expected[i]) <= kAtol + kRtol * std::fabs(expected[i]))) {
      std::ostringstream out;
      out.precision(17);
      out << what << "[" << i << "]: " << actual[i] << " vs DeepSpeed " << expected[i];
      return out.str();
    }
  return "";
}

std::vector<double> betas_of(const LRScheduler& scheduler) {
  const auto* one_cycle = dynamic_cast<const OneCycle*>(&scheduler);
  if (one_cycle == nullptr || !one_cycle->betas()) return {};
  return {one_cycle->betas()->first, one_cycle->betas()->second};
}

}  // namespace

TEST_CASE("LR schedules match DeepSpeed step for step", "[nn][lr_schedule]") {
  const JsonValue& ref = reference();
  CHECK(ref.at("deepspeed_version").as_string() == "0.16.0");
  size_t compared = 0, bit_exact = 0;
  for (const JsonValue& c : ref.at("cases").as_array()) {
    const std::string name = c.at("name").as_string();
    INFO("case: " << name);
    const auto scheduler =
        make_lr_scheduler(c.at("type").as_string(), params_of(c.at("params")), doubles(c.at("base_lrs")));
    CHECK(scheduler->type() == c.at("type").as_string());

    const JsonValue& initial = c.at("initial");
    CHECK(compare(scheduler->get_lrs(), doubles(initial.at("lrs")), "initial lrs") == "");
    const JsonValue* initial_betas = initial.find("betas");
    CHECK(compare(betas_of(*scheduler), initial_betas ? doubles(*initial_betas) : std::vector<double>{},
                  "initial betas") == "");

    for (const JsonValue& step : c.at("steps").as_array()) {
      const int64_t target = step.at("last_batch_iteration").as_int64();
      while (scheduler->last_batch_iteration() < target) scheduler->step();
      const std::string at = " at last_batch_iteration " + std::to_string(target);
      const std::vector<double> expected = doubles(step.at("lrs"));
      CHECK(compare(scheduler->get_lrs(), expected, "lrs" + at) == "");
      const JsonValue* betas = step.find("betas");
      CHECK(compare(betas_of(*scheduler), betas ? doubles(*betas) : std::vector<double>{}, "betas" + at) == "");
      compared += expected.size();
      for (size_t i = 0; i < expected.size(); ++i) bit_exact += scheduler->get_lrs()[i] == expected[i];
    }
  }
  CHECK(compared > 700);
  // With glibc's libm and no FMA contraction (nn/CMakeLists.txt) every value is bit-identical
  // today; the 1e-12 tolerance above is the contract, so another libm may differ in the last ulp.
  (void)bit_exact;
}

TEST_CASE("LR schedules resume from a state dict", "[nn][lr_schedule]") {
  for (const std::string type : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle"}) {
    INFO(type);
    LRParamMap params;
    if (type == "WarmupDecayLR" || type == "WarmupCosineLR") params = {{"total_num_steps", 60}, {"warmup_num_steps", 10}};
    if (type == "WarmupLR") params = {{"warmup_num_steps", 10}};
    if (type == "OneCycle") params = {{"cycle_min_lr", 0.001}, {"cycle_max_lr", 0.01}, {"cycle_first_step_size", 8},
                                      {"decay_step_size", 2}, {"decay_lr_rate", 0.1}};
    auto original = make_lr_scheduler(type, params, 0.003);
    for (int i = 0; i < 25; ++i) original->step();
    const LRSchedulerState state = original->state_dict();
    CHECK(state.last_batch_iteration == 24);

    auto resumed = make_lr_scheduler(type, params, 0.003);
    resumed->load_state_dict(state);
    CHECK(resumed->get_lr() == original->get_lr());
    CHECK(betas_of(*resumed) == betas_of(*original));
    for (int i = 0; i < 30; ++i) {
      original->step();
      resumed->step();
      CHECK(resumed->get_lr() == original->get_lr());
      CHECK(betas_of(*resumed) == betas_of(*original));
    }
    // step(k) jumps like DeepSpeed's step(batch_iteration).
    resumed->step(7);
    CHECK(resumed->last_batch_iteration() == 7);
  }
}

TEST_CASE("OneCycle exposes its momentum only when cycling", "[nn][lr_schedule]") {
  auto cycling = make_lr_scheduler("OneCycle", {{"cycle_min_lr", 0.1}, {"cycle_max_lr", 1.0}}, 0.5);
  const auto& one_cycle = dynamic_cast<const OneCycle&>(*cycling);
  REQUIRE(one_cycle.betas().has_value());
  CHECK(*one_cycle.betas() == std::make_pair(0.8, 0.99));  // DeepSpeed's value before the first step
  cycling->step();
  CHECK(one_cycle.compute_momentum().value() == one_cycle.betas()->first);

  auto plain = make_lr_scheduler("OneCycle", {{"cycle_min_lr", 0.1}, {"cycle_max_lr", 1.0}, {"cycle_momentum", false}}, 0.5);
  plain->step();
  CHECK_FALSE(dynamic_cast<const OneCycle&>(*plain).betas().has_value());

  // Resuming: nothing is written before the first step, as in DeepSpeed.
  auto resumed = make_lr_scheduler("OneCycle", {{"cycle_min_lr", 0.1}, {"cycle_max_lr", 1.0}, {"last_batch_iteration", 5}}, 0.5);
  CHECK(resumed->get_lr() == 0.5);
  CHECK_FALSE(dynamic_cast<const OneCycle&>(*resumed).betas().has_value());
}

TEST_CASE("make_lr_scheduler rejects bad types, names and values", "[nn][lr_schedule]") {
  auto error = [](const std::string& type, const LRParamMap& params) {
    return error_of([&] { make_lr_scheduler(type, params, 0.001); });
  };
  CHECK(error("WarmupLr", {}) == "unknown scheduler type \"WarmupLr\" (did you mean \"WarmupLR\"?); known types: "
                                 "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle (names are case-sensitive, as in "
                                 "DeepSpeed)");
  CHECK(error("Cosine", {}) == "unknown scheduler type \"Cosine\"; known types: WarmupLR, WarmupDecayLR, "
                               "WarmupCosineLR, OneCycle (names are case-sensitive, as in DeepSpeed)");
  CHECK(error("LRRangeTest", {}) == "scheduler type \"LRRangeTest\" (DeepSpeed's learning-rate range test) is not "
                                    "supported by Fathom; use WarmupLR, WarmupDecayLR, WarmupCosineLR or OneCycle");
  CHECK(error("WarmupLR", {{"warmup_max_Lr", 0.1}}) ==
        "WarmupLR: unknown parameter \"warmup_max_Lr\" (did you mean \"warmup_max_lr\"?); WarmupLR takes "
        "warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type, last_batch_iteration");
  CHECK(error("WarmupLR", {{"total_num_steps", 10}}).rfind("WarmupLR: unknown parameter \"total_num_steps\"; ", 0) ==
        0);
  CHECK(error("WarmupLR", {{"warmup_num_steps", "100"}}) ==
        "WarmupLR: warmup_num_steps must be an integer, got a string (\"100\")");
  CHECK(error("WarmupLR", {{"warmup_num_steps", 10.5}}) ==
        "WarmupLR: warmup_num_steps must be an integer, got a number (10.5)");
  CHECK(error("WarmupLR", {{"warmup_max_lr", true}}) == "WarmupLR: warmup_max_lr must be a number, got a bool (true)");
  CHECK(error("WarmupLR", {{"warmup_num_steps", -1}}) ==
        "WarmupLR: warmup_num_steps must be >= 0, got -1 (values below 2 are raised to 2, as in DeepSpeed)");
  CHECK(error("WarmupLR", {{"warmup_type", "cosine"}}) ==
        "WarmupLR: warmup_type must be \"log\" or \"linear\", got \"cosine\"");
  CHECK(error("WarmupLR", {{"warmup_min_lr", -0.5}}) == "WarmupLR: warmup_min_lr must be >= 0, got -0.5");
  CHECK(error("WarmupLR", {{"last_batch_iteration", -2}}) ==
        "LR scheduler: last_batch_iteration must be >= -1 (-1 starts from the beginning), got -2");
  CHECK(error("WarmupDecayLR", {}) ==
        "WarmupDecayLR: parameter total_num_steps is required (DeepSpeed has no default for it)");
  CHECK(error("WarmupDecayLR", {{"total_num_steps", 0}}) == "WarmupDecayLR: total_num_steps must be > 0, got 0");
  CHECK(error("WarmupCosineLR", {{"total_num_steps", 1000}}) ==
        "WarmupCosineLR: total_num_steps (1000) must differ from warmup_num_steps (1000 after raising it to at least "
        "2): the cosine phase would have zero length");
  CHECK(error("WarmupCosineLR", {{"total_num_steps", 100}, {"cos_min_ratio", 1.5}}) ==
        "WarmupCosineLR: cos_min_ratio must be in [0, 1], got 1.5");
  CHECK(error("WarmupCosineLR", {{"total_num_steps", 100}, {"warmup_min_ratio", -0.1}}) ==
        "WarmupCosineLR: warmup_min_ratio must be in [0, 1], got -0.1");
  CHECK(error("OneCycle", {{"cycle_max_lr", 0.1}}) ==
        "OneCycle: parameter cycle_min_lr is required (DeepSpeed has no default for it)");
  CHECK(error("OneCycle", {{"cycle_min_lr", 0.01}, {"cycle_max_lr", 0.1}, {"cycle_first_step_size", 0}}) ==
        "OneCycle: cycle_first_step_size must be >= 1, got 0");
  CHECK(error("OneCycle", {{"cycle_min_lr", 0.01}, {"cycle_max_lr", 0.1}, {"cycle_max_mom", 1.2}}) ==
        "OneCycle: cycle_max_mom must be in [0, 1], got 1.2");
  CHECK(error("OneCycle", {{"cycle_min_lr", 0.01}, {"cycle_max_lr", 0.1}, {"cycle_momentum", 1}}) ==
        "OneCycle: cycle_momentum must be true or false, got an integer (1)");
  CHECK(error("OneCycle", {{"cycle_min_lr", 0.01}, {"cycle_max_lr", 0.1}, {"cycle_momemtum", true}})
            .rfind("OneCycle: unknown parameter \"cycle_momemtum\" (did you mean \"cycle_momentum\"?)", 0) == 0);

  // An integer-valued double is an integer (JSON writers may print 1000 as 1000.0).
  CHECK(dynamic_cast<const WarmupLR&>(*make_lr_scheduler("WarmupLR", {{"warmup_num_steps", 1000.0}}, 0.1))
            .warmup_num_steps() == 1000);
}
