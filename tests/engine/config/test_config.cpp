// fathom::Config: DeepSpeed-style configs in JSON and YAML, every error with its exact text.
#include <catch2/catch.hpp>

#include <filesystem>

#include "test_util.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <set>

#include "core/error.h"
#include "engine/config/config.h"
#include "engine/config/auto_values.h"
#include "engine/config/check.h"
#include "engine/config/parse.h"

using namespace fathom;

using fathom::testing::error_of;

namespace {

std::string parse_error(const std::string& text) {
  return error_of([&] { Config::from_string(text); });
}

// A config with only the batch size and one more line.
std::string with(const std::string& line) { return "{\"train_batch_size\": 8, " + line + "}"; }

std::string supported_error(const std::string& text) {
  const Config config = Config::from_string(text);
  return error_of([&] { config.check_supported(); });
}

BatchConfig batch(int64_t tbs, int64_t micro, int64_t gas) { return BatchConfig{tbs, micro, gas, 0}; }

std::string batch_error(BatchConfig given, int64_t dp) {
  return error_of([&] { resolve_batch(given, dp); });
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = "fathom_test_config_" + name;
  std::ofstream(path) << text;
  return path;
}

// The value at dotted `path` of a parsed tree as a message shows it; "" when absent.
std::string value_at(const ConfigNode& root, const std::string& path) {
  const ConfigNode* node = &root;
  for (size_t start = 0; node && start <= path.size();) {
    const size_t dot = std::min(path.find('.', start), path.size());
    node = node->find(path.substr(start, dot - start));
    start = dot + 1;
  }
  return node ? describe_config_value(*node) : "";
}

}  // namespace

TEST_CASE("the original DeepSpeed tutorial config loads as written", "[engine]") {
  const std::string tutorial = R"({
  "train_batch_size": 8,

  #혼합 정밀도
  "fp16": {
    "enabled": true
  },

  #zero
  "zero_optimization": {
    "stage": 2
  }
})";
  const Config config = Config::from_string(tutorial);
  CHECK(config.batch.train_batch_size == 8);
  CHECK(config.fp16.enabled);
  CHECK(config.fp16.initial_scale_power == 16);
  CHECK(config.fp16.loss_scale_window == 1000);
  CHECK(config.zero.stage == 2);
  CHECK(config.zero.reduce_bucket_size == 500000000);
  CHECK_FALSE(config.zero.overlap_comm);
  // ZeRO stage 2 with fp16: built.
  CHECK(error_of([&] { config.check_supported(); }) == "(no error)");
  // Without its zero_optimization section the tutorial config trains (fp16) on one process.
  CHECK(supported_error(R"({"train_batch_size": 8, "fp16": {"enabled": true}})") == "(no error)");
}

TEST_CASE("check_supported names each feature that is not built yet", "[engine]") {
  CHECK(supported_error(with(R"("zero_optimization": {"stage": 1})")) == "(no error)");
  CHECK(supported_error(with(R"("zero_optimization": {"stage": 2})")) == "(no error)");
  CHECK(supported_error(with(R"("zero_optimization": {"stage": 3})")) == "(no error)");
  CHECK(supported_error(with(R"("bf16": {"enabled": true})")) == "(no error)");  // built: mixed precision
  CHECK(supported_error(with(R"("zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}})")) ==
        "(no error)");
  CHECK(supported_error(with(R"("zero_optimization": {"stage": 3, "offload_param": {"device": "nvme",
    "nvme_path": "/nvme"}})")) == "(no error)");  // built: parameter offload to NVMe
  CHECK(supported_error(with(R"("zero_optimization": {"stage": 0}, "fp16": {"enabled": false})")) == "(no error)");
}

TEST_CASE("config files: format from the extension, errors name the file and line", "[engine]") {
  const std::string json = write_file("a.json", "{\n  \"train_batch_size\": 8,\n  \"optimizer\": {\n    \"type\": \"Adam\",\n"
                                                "    \"params\": {\n      \"lr\": \"fast\"\n    }\n  }\n}\n");
  CHECK(error_of([&] { Config::from_file(json); }) ==
        json + ":6: config error at optimizer.params.lr: expected a number, true or false, or a list of numbers, got \"fast\"");
  const std::string yaml = write_file("b.yaml", "train_batch_size: 8\nzero_optimization:\n  stgae: 1\n");
  CHECK(error_of([&] { Config::from_file(yaml); }) ==
        yaml + ":3: config error at zero_optimization.stgae: unknown key; did you mean \"stage\"?");
  const std::string good = write_file("c.yml", "train_micro_batch_size_per_gpu: 4\ngradient_accumulation_steps: 2\n");
  const Config config = Config::from_file(good);
  CHECK(config.source == good);
  CHECK(config.batch.train_micro_batch_size_per_gpu == 4);
  CHECK(error_of([] { Config::from_file("no_such_dir/ds_config.json"); }) ==
        "no_such_dir/ds_config.json: config error: cannot open the file; check the path (relative paths start in the "
        "working directory)");
  std::remove(json.c_str());
  std::remove(yaml.c_str());
  std::remove(good.c_str());
}

TEST_CASE("comments: #, // and /* */ in JSON; never inside strings or YAML scalars", "[engine]") {
  const Config config = Config::from_string(R"(
// a line comment before the object still makes this JSON
{
  "train_batch_size": 16, # hjson comment after a value
  "gradient_accumulation_steps": 2,// no space needed
  /* a block comment
     over two lines "with quotes" */
  "scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear"}},
  "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},#tight
  "zero_optimization": {"offload_param": {"nvme_path": "s3://bucket/a // b /* c */ # d", "device": "none"}}
})");
  CHECK(config.batch.train_batch_size == 16);
  CHECK(config.batch.gradient_accumulation_steps == 2);
  CHECK(config.zero.offload_param.nvme_path == "s3://bucket/a // b /* c */ # d");
  CHECK(config.optimizer.type == "AdamW");

  // YAML: '#' is a comment only after whitespace; '//' is text.
  const Config yaml = Config::from_string("train_batch_size: 8   # comment\n"
                                          "zero_optimization:\n"
                                          "  offload_param:\n"
                                          "    nvme_path: s3://bucket/x#y // z\n");
  CHECK(yaml.zero.offload_param.nvme_path == "s3://bucket/x#y // z");
  CHECK(parse_error("{\"train_batch_size\": 8 /* never closed\n}") ==
        "config error: a /* comment is never closed; end it with */");
}

TEST_CASE("duplicate keys are errors, top-level and nested", "[engine]") {
  CHECK(parse_error("{\"train_batch_size\": 8,\n \"train_batch_size\": 16}") ==
        "config error at train_batch_size: duplicate key (first given at line 1); a key may appear only once in an "
        "object (DeepSpeed rejects duplicates too)");
  CHECK(parse_error("{\"train_batch_size\": 8,\n \"zero_optimization\": {\n  \"stage\": 0,\n  \"stage\": 1}}") ==
        "config error at zero_optimization.stage: duplicate key (first given at line 3); a key may appear only once "
        "in an object (DeepSpeed rejects duplicates too)");
  CHECK(parse_error("train_batch_size: 8\nfp16:\n  enabled: false\n  enabled: true\n") ==
        "config error at fp16.enabled: duplicate key (first given at line 3); a key may appear only once in an "
        "object (DeepSpeed rejects duplicates too)");
  // The same key in two different objects is fine.
  CHECK(parse_error(with(R"("fp16": {"enabled": false}, "bf16": {"enabled": false})")) == "(no error)");
}

TEST_CASE("integers accept integral floats like 5e8, not 5.5", "[engine]") {
  const Config config = Config::from_string(
      with(R"("zero_optimization": {"reduce_bucket_size": 5e8, "allgather_bucket_size": 2.0E8, "stage3_prefetch_bucket_size": 5e7})"));
  CHECK(config.zero.reduce_bucket_size == 500000000);
  CHECK(config.zero.allgather_bucket_size == 200000000);
  CHECK(config.zero.prefetch_bucket_size == 50000000);
  CHECK(Config::from_string("{\"train_batch_size\": 3.2e1}").batch.train_batch_size == 32);
  CHECK(parse_error("{\"train_batch_size\": 5.5}") == "config error at train_batch_size: expected an integer >= 1, got 5.5");
  CHECK(parse_error(with(R"("zero_optimization": {"reduce_bucket_size": 5.5e-1})")) ==
        "config error at zero_optimization.reduce_bucket_size: expected an integer >= 0, got 5.5e-1");
}

TEST_CASE("quoted numbers and bools are type errors naming the key", "[engine]") {
  CHECK(parse_error("{\"train_batch_size\": \"8\"}") ==
        "config error at train_batch_size: expected an integer >= 1, got the string \"8\"; write 8 without quotes");
  CHECK(parse_error(with(R"("gradient_clipping": "1.0")")) ==
        "config error at gradient_clipping: expected a number >= 0, got the string \"1.0\"; write 1.0 without quotes");
  CHECK(parse_error(with(R"("fp16": {"enabled": "true"})")) ==
        "config error at fp16.enabled: expected true or false, got the string \"true\"; write true without quotes");
  CHECK(parse_error(with(R"("optimizer": {"type": "Adam", "params": {"lr": "1e-3"}})")) ==
        "config error at optimizer.params.lr: expected a number, true or false, or a list of numbers, got the string "
        "\"1e-3\"; write 1e-3 without quotes");
  CHECK(parse_error(with(R"("optimizer": {"type": "Adam", "params": {"betas": [0.9, "0.99"]}})")) ==
        "config error at optimizer.params.betas[1]: expected a number, got the string \"0.99\"; write 0.99 without quotes");
  CHECK(parse_error(with(R"("scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "100"}})")) ==
        "config error at scheduler.params.warmup_num_steps: expected a number, got the string \"100\"; write 100 "
        "without quotes");
  CHECK(parse_error("train_batch_size: '8'\n") ==
        "config error at train_batch_size: expected an integer >= 1, got the string \"8\"; write 8 without quotes");
  // YAML 1.1 spellings are not bools.
  CHECK(parse_error("train_batch_size: 8\nwall_clock_breakdown: yes\n") ==
        "config error at wall_clock_breakdown: expected true or false, got yes");
}

TEST_CASE("\"auto\" is rejected with an explanation", "[engine]") {
  const std::string why =
      "\"auto\" is a placeholder that a program fills in from its own settings (the Hugging Face Trainer; "
      "fathom-train fills the usual ones), not the library; write ";
  CHECK(parse_error("{\"train_batch_size\": \"auto\"}") == "config error at train_batch_size: " + why + "an integer >= 1");
  CHECK(parse_error(with(R"("gradient_clipping": "auto")")) == "config error at gradient_clipping: " + why + "a number >= 0");
  CHECK(parse_error(with(R"("fp16": {"enabled": "auto"})")) == "config error at fp16.enabled: " + why + "true or false");
  CHECK(parse_error(with(R"("optimizer": {"type": "AdamW", "params": {"lr": "auto"}})")) ==
        "config error at optimizer.params.lr: " + why + "a number, true or false, or a list of numbers");
  CHECK(parse_error(with(R"("zero_optimization": {"stage3_prefetch_bucket_size": "auto"})")) ==
        "config error at zero_optimization.stage3_prefetch_bucket_size: " + why + "an integer >= 0");
  CHECK(parse_error(with(R"("scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": "auto"}})")) ==
        "config error at scheduler.params.warmup_max_lr: " + why + "a number, true or false, or a string");
}

TEST_CASE("wrong types and out-of-range values name the path, the value and what is allowed", "[engine]") {
  CHECK(parse_error("{\"train_batch_size\": 0}") == "config error at train_batch_size: expected an integer >= 1, got 0");
  CHECK(parse_error("{\"train_batch_size\": -4}") == "config error at train_batch_size: expected an integer >= 1, got -4");
  CHECK(parse_error("{\"train_batch_size\": true}") == "config error at train_batch_size: expected an integer >= 1, got true");
  CHECK(parse_error("{\"train_batch_size\": [8]}") == "config error at train_batch_size: expected an integer >= 1, got a list");
  CHECK(parse_error(with(R"("zero_optimization": {"stage": 4})")) ==
        "config error at zero_optimization.stage: expected an integer from 0 to 3, got 4");
  CHECK(parse_error(with(R"("gradient_clipping": -1)")) == "config error at gradient_clipping: expected a number >= 0, got -1");
  CHECK(parse_error(with(R"("steps_per_print": 0)")) == "config error at steps_per_print: expected an integer >= 1, got 0");
  CHECK(parse_error(with(R"("seed": -1)")) == "config error at seed: expected an integer >= 0, got -1");
  CHECK(parse_error(with(R"("fp16": true)")) == "config error at fp16: expected an object of key: value pairs, got true");
  CHECK(parse_error(with(R"("fp16": {"initial_scale_power": 200})")) ==
        "config error at fp16.initial_scale_power: expected an integer from 0 to 127, got 200");
  CHECK(parse_error(with(R"("fp16": {"min_loss_scale": 0})")) ==
        "config error at fp16.min_loss_scale: expected a number > 0, got 0 (a zero scale would zero every gradient)");
  CHECK(parse_error(with(R"("zero_optimization": {"offload_optimizer": {"ratio": 1.5}})")) ==
        "config error at zero_optimization.offload_optimizer.ratio: expected a number from 0 to 1, got 1.5");
  CHECK(parse_error(with(R"("zero_optimization": {"offload_optimizer": {"device": "gpu"}})")) ==
        "config error at zero_optimization.offload_optimizer.device: expected one of \"none\", \"cpu\", \"nvme\", got "
        "\"gpu\"; did you mean \"cpu\"?");
  CHECK(parse_error(with(R"("zero_optimization": {"offload_optimizer": {"device": "nvme"}})")) ==
        "config error at zero_optimization.offload_optimizer.device: \"nvme\" needs \"nvme_path\" (a directory on a "
        "fast local disk)");
  CHECK(parse_error(with(R"("fp16": {"enabled": true}, "bf16": {"enabled": true})")) ==
        "config error: fp16.enabled and bf16.enabled are both true; choose one mixed-precision mode (DeepSpeed rejects "
        "both too)");
  CHECK(parse_error(with(R"("bf16": {"enabled": false}, "bfloat16": {"enabled": false})")) ==
        "config error at bfloat16: \"bf16\" is given too (line 1); \"bfloat16\" is DeepSpeed's old name for it, keep one");
  CHECK(parse_error(with(R"("zero_optimization": {"prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 2})")) ==
        "config error at zero_optimization.prefetch_bucket_size: also given as \"stage3_prefetch_bucket_size\" (line 1); "
        "DeepSpeed reads both names as one setting, keep one");
  CHECK(parse_error(with(R"("zero_optimization": {"cpu_offload": true, "offload_optimizer": {"device": "none"}})")) ==
        "config error at zero_optimization.cpu_offload: is DeepSpeed's deprecated spelling of \"offload_optimizer\": "
        "{\"device\": \"cpu\"}, which is given too (line 1); keep \"offload_optimizer\"");
}

TEST_CASE("DeepSpeed's deprecated spellings are read as the current keys, each with a notice", "[engine]") {
  const auto read = [](const std::string& body) {
    return Config::from_string("{\"train_batch_size\": 8,\n" + body + "}");
  };
  const Config boolean = read(R"("zero_optimization": true)");
  CHECK(boolean.zero.stage == 1);
  CHECK_FALSE(boolean.zero.overlap_comm);
  CHECK(boolean.notices == std::vector<std::string>{
                               "config notice at zero_optimization (line 2): DeepSpeed's deprecated boolean form, read "
                               "as {\"stage\": 1}"});
  CHECK(read(R"("zero_optimization": false)").zero.stage == 0);

  const Config offload = read(R"("zero_optimization": {"stage": 3, "cpu_offload": true, "cpu_offload_param": true,
    "cpu_offload_use_pin_memory": true, "stage3_gather_fp16_weights_on_model_save": true})");
  CHECK(offload.zero.offload_optimizer.device == "cpu");
  CHECK(offload.zero.offload_param.device == "cpu");
  CHECK(offload.zero.offload_optimizer.pin_memory);
  CHECK(offload.zero.gather_16bit_weights_on_model_save);
  REQUIRE(offload.notices.size() == 4);
  CHECK(offload.notices[0] == "config notice at zero_optimization.cpu_offload (line 2): DeepSpeed's deprecated spelling, "
                              "read as \"offload_optimizer\": {\"device\": \"cpu\"}");
  CHECK(offload.notices[2] == "config notice at zero_optimization.cpu_offload_use_pin_memory (line 3): DeepSpeed's "
                              "deprecated spelling (which DeepSpeed ignores), read as \"pin_memory\": true in "
                              "offload_optimizer and offload_param");
  // Both mapped offloads are built (parameters to host memory at stage 3).
  CHECK(error_of([&] { offload.check_supported(); }) == "(no error)");

  const Config bfloat = read(R"("bfloat16": {"enabled": true})");
  CHECK(bfloat.bf16.enabled);
  CHECK(bfloat.notices == std::vector<std::string>{
                              "config notice at bfloat16 (line 2): DeepSpeed's deprecated name, read as \"bf16\""});
  const Config aio = read(R"("aio": {"thread_count": 4})");
  CHECK(aio.aio.intra_op_parallelism == 4);
  CHECK(aio.notices == std::vector<std::string>{
                           "config notice at aio.thread_count (line 2): DeepSpeed's older name, read as "
                           "\"intra_op_parallelism\" (4 I/O threads)"});
  // An unknown key is still an error with a did-you-mean.
  CHECK(parse_error(with(R"("zero_optimization": {"cpu_ofload": true})")).find("did you mean \"cpu_offload\"") !=
        std::string::npos);
}

TEST_CASE("syntax errors and non-object configs", "[engine]") {
  CHECK(parse_error("{\"train_batch_size\": [8}") ==
        "config error: invalid JSON: expected ',' or ']' after an array element, found character '}' (column 24)");
  CHECK(parse_error("") == "config error: the config is empty; write an object such as {\"train_batch_size\": 8}");
  CHECK(parse_error("# only a comment\n") ==
        "config error: the config is empty; write an object such as {\"train_batch_size\": 8}");
  CHECK(parse_error("- 1\n- 2\n") == "config error: the config must be an object of key: value pairs, got a list");
  CHECK(parse_error("train_batch_size: 8\n---\ntrain_batch_size: 16\n") ==
        "config error: the text holds more than one YAML document; a config is one document");
}

TEST_CASE("JSON syntax errors say what is wrong where: a missing }, a NUL byte, text after the object", "[engine]") {
  CHECK(parse_error("{\"train_batch_size\": 8,\n \"gradient_clipping\": 1.0\n") ==
        "config error: invalid JSON: expected ',' or '}' after an object member, found end of text (column 1)");
  CHECK(error_of([] { Config::from_string(std::string("{\"train_batch_size\": 8, \"x\0g\": 1}", 30)); }) ==
        "config error: a NUL byte (0x00) at column 27; a config is text: is this the right file?");
  CHECK(parse_error("{\"train_batch_size\": 8}\n{\"a\": 1}\n") ==
        "config error: invalid JSON: unexpected character '{' after the end of the JSON value; a config is one JSON "
        "object (column 1)");
  CHECK(parse_error("{\"train_batch_size\": 8} trailing") ==
        "config error: invalid JSON: unexpected character 't' after the end of the JSON value; a config is one JSON "
        "object (column 25)");
  // hjson's leniencies that DeepSpeed configs use: comments and trailing commas.
  const Config lenient = Config::from_string(
      "{\"train_batch_size\": 8, // eight\n \"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": [0.9, 0.99,],},},\n}",
      ConfigFormat::Json);
  CHECK(lenient.batch.train_batch_size == 8);
}

TEST_CASE("a directory, a huge file, a YAML alias bomb and deep nesting are refused before they cost memory", "[engine]") {
  std::filesystem::create_directories("fathom_test_config_dir");
  CHECK(error_of([] { Config::from_file("fathom_test_config_dir"); }) ==
        "fathom_test_config_dir: config error: is a directory, not a config file; name the JSON or YAML file in it");
  std::filesystem::remove("fathom_test_config_dir");
  {
    std::ofstream big("fathom_test_config_big.json");
    big << std::string(17u << 20, ' ');
  }
  CHECK(error_of([] { Config::from_file("fathom_test_config_big.json"); }).find("the file is 17 MiB; a config is a few kilobytes") !=
        std::string::npos);
  std::filesystem::remove("fathom_test_config_big.json");
  // Eight levels of ten aliases: 10^9 values once expanded, 511 bytes as text.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 8; ++level) {
    const std::string previous = "*a" + std::to_string(level - 1);
    bomb += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [" + previous;
    for (int i = 1; i < 10; ++i) bomb += ", " + previous;
    bomb += "]\n";
  }
  CHECK(parse_error(bomb).find("config error at a4[7]: ") == 0);
  CHECK(parse_error(bomb).find("the config expands to more than 100000 values (YAML aliases multiply what they refer to)") !=
        std::string::npos);
  CHECK(parse_error("a: " + std::string(100, '[') + std::string(100, ']') + "\n")
            .find("lists and objects nested deeper than 64 levels") != std::string::npos);
  CHECK(parse_error("{\"a\": " + std::string(300, '[') + std::string(300, ']') + "}")
            .find("invalid JSON: nesting deeper than 256 levels") != std::string::npos);
}

TEST_CASE("optimizer and scheduler sections", "[engine]") {
  const Config config = Config::from_string(with(R"(
    "optimizer": {"type": "adamw", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 1e3, "warmup_num_steps": 10}})"));
  CHECK(config.optimizer.type == "adamw");
  CHECK(std::get<double>(config.optimizer.params.at("lr").value()) == 3e-4);
  CHECK(std::get<std::vector<double>>(config.optimizer.params.at("betas").value()) == std::vector<double>{0.9, 0.95});
  CHECK(config.scheduler.type == "WarmupCosineLR");
  CHECK(std::get<double>(config.scheduler.params.at("total_num_steps").value()) == 1000.0);
  CHECK(std::get<int64_t>(config.scheduler.params.at("warmup_num_steps").value()) == 10);

  CHECK(parse_error(with(R"("optimizer": {"type": "Adamm"})")) ==
        "config error at optimizer.type: \"Adamm\" is not supported (not an optimizer Fathom implements); did you mean "
        "\"Adam\"?; use one of Adam, AdamW, SGD, Lamb, Lion, OneBitAdam, ZeroOneAdam, OneBitLamb");
  CHECK(parse_error(with(R"("optimizer": {"type": "Adagrad"})")) ==
        "config error at optimizer.type: \"Adagrad\" is not supported (Fathom does not implement DeepSpeed's "
        "Adagrad); use one of Adam, AdamW, SGD, Lamb, Lion, OneBitAdam, ZeroOneAdam, OneBitLamb");
  // DeepSpeed's 1-bit LAMB tutorial's optimizer section, as it is.
  CHECK_NOTHROW(Config::from_string(with(R"("optimizer": {"type": "OneBitLamb", "params": {"lr": 11e-3,
      "max_coeff": 0.3, "min_coeff": 0.01, "freeze_step": 1000, "cuda_aware": false, "comm_backend_name": "nccl",
      "coeff_beta": 0.9, "factor_max": 4.0, "factor_min": 0.5, "factor_threshold": 0.1}})")));
  CHECK_THAT(parse_error(with(R"("optimizer": {"type": "OneBitLamb", "params": {"factor_min": 5}})")),
             Catch::Contains("optimizer.params") && Catch::Contains("\"factor_min\" (5) must be <= \"factor_max\" (4)"));
  // DeepSpeed's own examples spell it "OnebitAdam"; the string parameter is read as one.
  const Config onebit = Config::from_string(with(R"("optimizer": {"type": "OnebitAdam", "params": {"freeze_step": 400,
      "cuda_aware": false, "comm_backend_name": "nccl"}})"));
  CHECK(std::get<std::string>(onebit.optimizer.params.at("comm_backend_name").value()) == "nccl");
  CHECK(Config::from_string(onebit.to_json()).optimizer.params.size() == 3);  // the recorded config keeps it
  CHECK(parse_error(with(R"("optimizer": {"params": {"lr": 0.1}})")) ==
        "config error at optimizer: \"type\" is missing; name the optimizer, e.g. \"type\": \"AdamW\" (Fathom "
        "implements Adam, AdamW, SGD, Lamb, Lion, OneBitAdam, ZeroOneAdam, OneBitLamb)");
  // Parameter names and values are checked by nn::make_optimizer, with the config's path.
  CHECK(parse_error(with(R"("optimizer": {"type": "Adam", "params": {"lrr": 0.1}})")).rfind(
            "config error at optimizer.params.lrr: Adam: unknown optimizer parameter \"lrr\"; did you mean \"lr\"?", 0) == 0);
  CHECK(parse_error(with(R"("scheduler": {"type": "WarmupLr"})")) ==
        "config error at scheduler.type: \"WarmupLr\" is not supported (not a schedule Fathom implements; names are "
        "case-sensitive, as in DeepSpeed); did you mean \"WarmupLR\"?; use one of WarmupLR, WarmupDecayLR, "
        "WarmupCosineLR, OneCycle");
  CHECK(parse_error(with(R"("scheduler": {"type": "LRRangeTest"})")) ==
        "config error at scheduler.type: \"LRRangeTest\" is not supported (Fathom does not implement DeepSpeed's "
        "LRRangeTest); use one of WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle");
  CHECK(parse_error(with(R"("scheduler": {"type": "WarmupLR", "params": {"warmup_num_step": 10}})"))
            .rfind("config error at scheduler.params.warmup_num_step: WarmupLR: ", 0) == 0);
  CHECK(parse_error(with(R"("optimizer": {"type": "Adam", "legacy_fusion": true})")) ==
        "config error at optimizer.legacy_fusion: true is not supported (DeepSpeed's legacy fused fp16 optimizer); "
        "remove the key");
}

TEST_CASE("batch sizes: DeepSpeed's rule at dp 1, 2 and 4", "[engine]") {
  auto resolved = [](BatchConfig given, int64_t dp) {
    const BatchConfig b = resolve_batch(given, dp);
    return std::vector<int64_t>{b.train_batch_size, b.train_micro_batch_size_per_gpu, b.gradient_accumulation_steps};
  };
  using V = std::vector<int64_t>;
  // All three: checked.
  CHECK(resolved(batch(32, 8, 4), 1) == V{32, 8, 4});
  CHECK(resolved(batch(32, 8, 2), 2) == V{32, 8, 2});
  CHECK(resolved(batch(32, 8, 1), 4) == V{32, 8, 1});
  CHECK(batch_error(batch(32, 8, 2), 4) ==
        "config error: train_batch_size (32) != train_micro_batch_size_per_gpu (8) * gradient_accumulation_steps (2) "
        "* data-parallel world size (4) = 64");
  CHECK(batch_error(batch(32, 8, 2), 1) ==
        "config error: train_batch_size (32) != train_micro_batch_size_per_gpu (8) * gradient_accumulation_steps (2) "
        "* data-parallel world size (1) = 16");
  // tbs + micro: gas derived.
  CHECK(resolved(batch(32, 8, 0), 1) == V{32, 8, 4});
  CHECK(resolved(batch(32, 8, 0), 2) == V{32, 8, 2});
  CHECK(resolved(batch(32, 8, 0), 4) == V{32, 8, 1});
  CHECK(batch_error(batch(24, 8, 0), 2) ==
        "config error: train_batch_size (24) is not a multiple of train_micro_batch_size_per_gpu (8) * data-parallel "
        "world size (2) = 16, so gradient_accumulation_steps = train_batch_size / (train_micro_batch_size_per_gpu * "
        "data-parallel world size) is not a whole number; change one of them or give all three");
  CHECK(batch_error(batch(16, 8, 0), 4).rfind("config error: train_batch_size (16) is not a multiple of "
                                              "train_micro_batch_size_per_gpu (8) * data-parallel world size (4) = 32", 0) == 0);
  // tbs + gas: micro derived.
  CHECK(resolved(batch(32, 0, 2), 1) == V{32, 16, 2});
  CHECK(resolved(batch(32, 0, 2), 2) == V{32, 8, 2});
  CHECK(resolved(batch(32, 0, 2), 4) == V{32, 4, 2});
  CHECK(batch_error(batch(12, 0, 2), 4) ==
        "config error: train_batch_size (12) is not a multiple of gradient_accumulation_steps (2) * data-parallel world "
        "size (4) = 8, so train_micro_batch_size_per_gpu = train_batch_size / (gradient_accumulation_steps * "
        "data-parallel world size) is not a whole number; change one of them or give all three");
  // micro + gas: tbs derived.
  CHECK(resolved(batch(0, 4, 3), 1) == V{12, 4, 3});
  CHECK(resolved(batch(0, 4, 3), 2) == V{24, 4, 3});
  CHECK(resolved(batch(0, 4, 3), 4) == V{48, 4, 3});
  // tbs alone: gas 1, micro = tbs / dp.
  CHECK(resolved(batch(8, 0, 0), 1) == V{8, 8, 1});
  CHECK(resolved(batch(8, 0, 0), 2) == V{8, 4, 1});
  CHECK(resolved(batch(8, 0, 0), 4) == V{8, 2, 1});
  CHECK(batch_error(batch(10, 0, 0), 4) ==
        "config error: train_batch_size (10) is not a multiple of data-parallel world size (4); with only "
        "train_batch_size given, gradient_accumulation_steps = 1 and train_micro_batch_size_per_gpu = "
        "train_batch_size / data-parallel world size must be a whole number; change train_batch_size or give "
        "train_micro_batch_size_per_gpu");
  CHECK(batch_error(batch(2, 0, 0), 4).rfind("config error: train_batch_size (2) is not a multiple of data-parallel "
                                             "world size (4);", 0) == 0);
  // micro alone: gas 1.
  CHECK(resolved(batch(0, 4, 0), 1) == V{4, 4, 1});
  CHECK(resolved(batch(0, 4, 0), 2) == V{8, 4, 1});
  CHECK(resolved(batch(0, 4, 0), 4) == V{16, 4, 1});
  // Neither: an error, at parse time and in resolve_batch.
  const std::string none =
      "config error: train_batch_size or train_micro_batch_size_per_gpu must be given (DeepSpeed's rule: "
      "train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * data-parallel world size)";
  CHECK(batch_error(batch(0, 0, 4), 2) == none);
  CHECK(parse_error("{\"gradient_accumulation_steps\": 4}") == none);
  CHECK(parse_error("{}") == none);
  CHECK(batch_error(batch(8, 0, 0), 0) == "resolve_batch: the data-parallel world size must be >= 1, got 0");

  Config config = Config::from_string(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})");
  CHECK_FALSE(config.batch.resolved());
  config.resolve_batch(4);
  CHECK(config.batch.resolved());
  CHECK(config.batch.train_micro_batch_size_per_gpu == 4);
  CHECK(config.batch.dp_world_size == 4);
}

TEST_CASE("YAML configs", "[engine]") {
  const Config config = Config::from_string(R"(# ds_config.yaml
train_micro_batch_size_per_gpu: 4
gradient_accumulation_steps: 2
gradient_clipping: 1.0
steps_per_print: 50
wall_clock_breakdown: true
seed: 42
optimizer:
  type: AdamW
  params:
    lr: 6.0e-4
    betas: [0.9, 0.95]
    weight_decay: 0.1
scheduler:
  type: WarmupLR
  params:
    warmup_num_steps: 100
    warmup_type: linear
bf16:
  enabled: false
zero_optimization:
  stage: 0
  reduce_bucket_size: 5e8
  offload_optimizer:
    device: none
)");
  CHECK(config.batch.train_micro_batch_size_per_gpu == 4);
  CHECK(config.gradient_clipping == 1.0);
  CHECK(config.steps_per_print == 50);
  CHECK(config.wall_clock_breakdown);
  CHECK(config.seed == uint64_t{42});
  CHECK(config.optimizer.type == "AdamW");
  CHECK(std::get<double>(config.optimizer.params.at("lr").value()) == 6.0e-4);
  CHECK(std::get<std::string>(config.scheduler.params.at("warmup_type").value()) == "linear");
  CHECK(config.zero.reduce_bucket_size == 500000000);
  // The hint picks comment handling; yaml-cpp reads either syntax, so a wrong hint still parses.
  CHECK(error_of([] { Config::from_string("train_batch_size: 8\n", ConfigFormat::Json); }) == "(no error)");
  CHECK(Config::from_string("{\"train_batch_size\": 8}", ConfigFormat::Yaml).batch.train_batch_size == 8);
  // Null means the default.
  const Config nulls = Config::from_string("train_batch_size: 8\nseed:\ngradient_clipping: null\n");
  CHECK_FALSE(nulls.seed.has_value());
  CHECK(nulls.gradient_clipping == 0);
}

TEST_CASE("an unknown top-level key like no known one is ignored with a notice, as DeepSpeed ignores it", "[engine]") {
  const Config config = Config::from_string(with(R"("cuda_visible_devices": "0,1", "completely_unrelated": 1)"));
  CHECK(config.ignored_keys == std::vector<std::string>{"cuda_visible_devices", "completely_unrelated"});
  REQUIRE(config.notices.size() == 2);
  CHECK(config.notices[0] ==
        "config notice at cuda_visible_devices (line 1): unknown key, ignored as DeepSpeed ignores it (no key Fathom or "
        "DeepSpeed reads is close to it; fathom-config check --strict refuses it)");
  // Inside a known section every unknown key stays an error.
  CHECK(parse_error(with(R"("bf16": {"cuda_visible_devices": true})")) ==
        "config error at bf16.cuda_visible_devices: unknown key; known keys: enabled, immediate_grad_update");
}

TEST_CASE("unknown keys are errors with a suggestion", "[engine]") {
  CHECK(parse_error(with(R"("zero_optimization": {"stgae": 2})")) ==
        "config error at zero_optimization.stgae: unknown key; did you mean \"stage\"?");
  CHECK(parse_error(with(R"("train_batch_szie": 8)")) ==
        "config error at train_batch_szie: unknown key; did you mean \"train_batch_size\"?");
  CHECK(parse_error(with(R"("gradient_cliping": 1.0)")) ==
        "config error at gradient_cliping: unknown key; did you mean \"gradient_clipping\"?");
  CHECK(parse_error(with(R"("fp16": {"enabeld": true})")) == "config error at fp16.enabeld: unknown key; did you mean \"enabled\"?");
  CHECK(parse_error(with(R"("bf16": {"xyz": true})")) ==
        "config error at bf16.xyz: unknown key; known keys: enabled, immediate_grad_update");
  CHECK(parse_error(with(R"("tensorboard": {"enabled": false, "output_pth": "x"})")) ==
        "config error at tensorboard.output_pth: unknown key; did you mean \"output_path\"?");
  CHECK(parse_error(with(R"("zero_optimization": {"offload_optimizer": {"devce": "cpu"}})")) ==
        "config error at zero_optimization.offload_optimizer.devce: unknown key; did you mean \"device\"?");
  CHECK(parse_error(with(R"("optimizer": {"type": "Adam", "parms": {}})")) ==
        "config error at optimizer.parms: unknown key; did you mean \"params\"?");
}

TEST_CASE("DeepSpeed keys Fathom does not implement: accepted off, errors on", "[engine]") {
  // Off or at DeepSpeed's default: accepted.
  CHECK(parse_error(with(R"(
    "prescale_gradients": false, "gradient_predivide_factor": 1, "sparse_gradients": false,
    "memory_breakdown": false, "dump_state": false, "communication_data_type": null,
    "zero_allow_untested_optimizer": true, "zero_force_ds_cpu_optimizer": false, "vocabulary_size": 50257,
    "activation_checkpointing": {"partition_activations": false, "cpu_checkpointing": false},
    "aio": {"block_size": 1048576, "queue_depth": 8},
    "checkpoint": {"tag_validation": "Warn", "parallel_write": {"pipeline_stage": false}},
    "pipeline": {"stages": "auto"},
    "flops_profiler": {"enabled": false, "profile_step": 5},
    "tensorboard": {"enabled": false, "output_path": "logs/"},
    "wandb": {"enabled": false}, "csv_monitor": {"enabled": false}, "comms_logger": {"enabled": false},
    "compression_training": {"weight_quantization": {"shared_parameters": {"enabled": false}}},
    "data_efficiency": {"enabled": false}, "elasticity": {"enabled": false}, "autotuning": {"enabled": false},
    "amp": {"enabled": false, "opt_level": "O1"}, "sparse_attention": {}, "timers": {"throughput": {"enabled": true}})")) ==
        "(no error)");
  // On: an error naming the key.
  CHECK(parse_error(with(R"("eigenvalue": {"enabled": true})")) ==
        "config error at eigenvalue.enabled: true is not supported (Fathom does not implement DeepSpeed's eigenvalue "
        "computation); remove the section or set it to false");
  CHECK(parse_error(with(R"("wandb": {"enabled": true, "project": "deepspeed"})")) ==
        "config error at wandb.enabled: true is not supported (Fathom does not implement DeepSpeed's Weights & Biases "
        "monitor); it needs the service's network client. Write TensorBoard files instead (\"tensorboard\": "
        "{\"enabled\": true}) and import them (wandb sync --sync-tensorboard DIR)");
  // The monitors Fathom has: read, with DeepSpeed's defaults.
  const Config monitors = Config::from_string(with(R"("tensorboard": {"enabled": true, "output_path": "logs/"},
      "csv_monitor": {"enabled": true, "job_name": "run7"})"));
  CHECK(monitors.tensorboard.enabled);
  CHECK(monitors.tensorboard.output_path == "logs/");
  CHECK(monitors.tensorboard.job_name == "DeepSpeedJobName");
  CHECK(monitors.csv_monitor.job_name == "run7");
  // The profilers: DeepSpeed's keys and defaults, and Fathom's trace.
  const Config profiling = Config::from_string(with(R"("flops_profiler": {"enabled": true, "profile_step": 3,
      "output_file": "prof.txt"}, "comms_logger": {"enabled": true, "prof_all": false, "prof_ops": ["all_reduce"]},
      "trace": {"enabled": true, "steps": [4, 6]})"));
  CHECK(profiling.flops_profiler.enabled);
  CHECK(profiling.flops_profiler.profile_step == 3);
  CHECK(profiling.flops_profiler.module_depth == -1);
  CHECK(profiling.flops_profiler.top_modules == 1);
  CHECK(profiling.flops_profiler.detailed);
  CHECK(profiling.flops_profiler.output_file == "prof.txt");
  CHECK(profiling.comms_logger.prof_ops == std::vector<std::string>{"all_reduce"});
  CHECK(profiling.trace.first_step == 4);
  CHECK(profiling.trace.last_step == 6);
  CHECK(Config::from_string(profiling.to_json()).trace.last_step == 6);  // the recorded config keeps them
  CHECK(parse_error(with(R"("comms_logger": {"enabled": true, "prof_ops": ["allreduce"]})")) ==
        "config error at comms_logger.prof_ops: \"allreduce\" is not a collective; name some of: all_reduce, "
        "reduce_scatter, reduce_scatter_v, all_gather, all_gather_v, broadcast, all_to_all, send, recv, barrier");
  CHECK(parse_error(with(R"("comms_logger": {"enabled": true, "prof_all": false})")) ==
        "config error at comms_logger.prof_ops: is empty while prof_all is false, so nothing would be logged; list "
        "ops or set prof_all");
  CHECK(parse_error(with(R"("trace": {"enabled": true, "steps": [5, 2]})")) ==
        "config error at trace.steps: expected [first, last] with first <= last (1-based step numbers), e.g. [2, 3]");
  CHECK(parse_error(with(R"("trace": {"enabled": true, "steps": [0, 2]})")) ==
        "config error at trace.steps: expected a list of integers >= 1, got 0");
  CHECK(parse_error(with(R"("flops_profiler": {"enabled": true, "top_modules": 0})")) ==
        "config error at flops_profiler.top_modules: expected an integer >= 1, got 0");
  CHECK(parse_error(with(R"("csv_monitor": {"enabled": true, "job_name": ""})")) ==
        "config error at csv_monitor.job_name: is empty; the files go to output_path/job_name, so name the job");
  CHECK(parse_error(with(R"("compression_training": {"weight_quantization": {"shared_parameters": {"enabled": true}}})")) ==
        "config error at compression_training.weight_quantization.shared_parameters.enabled: true is not supported "
        "(Fathom does not implement DeepSpeed's compression training); remove the section or set it to false");
  CHECK(parse_error(with(R"("activation_checkpointing": {"contiguous_memory_optimization": true})")) ==
        "config error at activation_checkpointing.contiguous_memory_optimization: true is not supported: Fathom's "
        "caching allocator reuses the checkpoints' blocks; there is no contiguous checkpoint buffer; remove it or set "
        "false");
  CHECK(parse_error(with(R"("activation_checkpointing": {"cpu_checkpointing": true})")) ==
        "config error at activation_checkpointing.cpu_checkpointing: true is not supported: checkpointed activations "
        "stay on the model's device (Fathom offloads optimizer state, not activations); remove it or set false");
  CHECK(parse_error(with(R"("activation_checkpointing": {"number_checkpoints": 0})")) ==
        "config error at activation_checkpointing.number_checkpoints: expected an integer >= 1, got 0");
  CHECK(parse_error(with(R"("sequence_parallel": 1)")) ==
        "config error at sequence_parallel: expected true or false, got 1");
  CHECK(parse_error(with(R"("tensor_parallel": {"autotp_size": -1})")) ==
        "config error at tensor_parallel.autotp_size: expected an integer >= 0, got -1");
  CHECK(parse_error(with(R"("tensor_parallel": {"tp_size": 2})")).rfind(
            "config error at tensor_parallel.tp_size: unknown key", 0) == 0);
  CHECK(parse_error(with(R"("tensor_parallel": {"keep_module_on_host": true})")) ==
        "config error at tensor_parallel.keep_module_on_host: true is not supported (it concerns DeepSpeed's AutoTP "
        "module injection; Fathom's tensor-parallel layers are built in): remove it or set false");
  CHECK(parse_error(with(R"("checkpoint": {"parallel_write": {"pipeline_stage": true}})")) ==
        "config error at checkpoint.parallel_write.pipeline_stage: true is not supported (Fathom does not implement "
        "DeepSpeed's checkpoint options); remove the key or use false");
  CHECK(parse_error(with(R"("activation_checkpointing": {"partitioned_activations": true})")) ==
        "config error at activation_checkpointing.partitioned_activations: unknown key; did you mean "
        "\"partition_activations\"?");
  CHECK(parse_error(with(R"("sparse_attention": {"mode": "fixed"})")) ==
        "config error at sparse_attention: not supported (Fathom does not implement DeepSpeed's sparse attention); "
        "remove the section");
  CHECK(parse_error(with(R"("zero_allow_untested_optimizer": "yes")")) ==
        "config error at zero_allow_untested_optimizer: expected true or false, got \"yes\"");
  CHECK(parse_error(with(R"("zero_optimization": {"zero_quantized_weights": true})")) ==
        "config error at zero_optimization.zero_quantized_weights: true is not supported (Fathom does not implement "
        "DeepSpeed's ZeRO++ quantized weights); use false");
  CHECK(parse_error(with(R"("zero_optimization": {"zero_hpz_partition_size": 8})")) ==
        "config error at zero_optimization.zero_hpz_partition_size: 8 is not supported (Fathom does not implement "
        "DeepSpeed's ZeRO++ hierarchical partitioning); use 1");
  CHECK(parse_error(with(R"("fp16": {"fp16_master_weights_and_grads": true})")) ==
        "config error at fp16.fp16_master_weights_and_grads: true is not supported (Fathom does not implement "
        "DeepSpeed's fp16 master weights and gradients: its master weights are always fp32); use false");
}

TEST_CASE("defaults follow DeepSpeed", "[engine]") {
  const Config config = Config::from_string("{\"train_batch_size\": 8}");
  CHECK(config.gradient_clipping == 0);
  CHECK(config.steps_per_print == 10);
  CHECK_FALSE(config.wall_clock_breakdown);
  CHECK_FALSE(config.seed.has_value());
  CHECK(config.optimizer.type.empty());
  CHECK(config.scheduler.type.empty());
  CHECK(config.fp16.loss_scale == 0);
  CHECK(config.fp16.hysteresis == 2);
  CHECK(config.fp16.min_loss_scale == 1);
  CHECK(config.zero.stage == 0);
  CHECK(config.zero.contiguous_gradients);
  CHECK(config.zero.allgather_bucket_size == 500000000);
  CHECK(config.zero.prefetch_bucket_size == 50000000);
  CHECK(config.zero.param_persistence_threshold == 100000);
  CHECK(config.zero.offload_optimizer.device == "none");
  CHECK(config.zero.offload_param.buffer_count == 5);
  CHECK(config.zero.offload_optimizer.buffer_count == 4);
  // overlap_comm defaults to true for stage 3 (as DeepSpeed's validator sets it) and stage 0
  // (Fathom's bucketed all-reduce), false for stages 1 and 2.
  CHECK(Config::from_string(with(R"("zero_optimization": {"stage": 3})")).zero.overlap_comm);
  CHECK(Config::from_string(with(R"("zero_optimization": {"stage": 0})")).zero.overlap_comm);
  CHECK_FALSE(Config::from_string(with(R"("zero_optimization": {"stage": 0, "overlap_comm": false})")).zero.overlap_comm);
  CHECK_FALSE(Config::from_string(with(R"("zero_optimization": {"stage": 3, "overlap_comm": false})")).zero.overlap_comm);
  // Either spelling of a stage-3 key.
  CHECK(Config::from_string(with(R"("zero_optimization": {"max_live_parameters": 7})")).zero.max_live_parameters == 7);
  CHECK(Config::from_string(with(R"("zero_optimization": {"stage3_max_live_parameters": 7})")).zero.max_live_parameters == 7);
}

TEST_CASE("to_json writes the config as used and reads back the same", "[engine]") {
  Config config = Config::from_string(R"({
    "train_batch_size": 32, "gradient_accumulation_steps": 2, "seed": 7, "gradient_clipping": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95]}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10, "warmup_type": "linear"}},
    "zero_optimization": {"offload_param": {"nvme_path": "/tmp/a \"b\""}}})");
  config.resolve_batch(4);
  const std::string json = config.to_json();
  CHECK(json.find("\"train_micro_batch_size_per_gpu\": 4") != std::string::npos);
  CHECK(json.find("\"gradient_clipping\": 1.0") != std::string::npos);
  CHECK(json.find("\"betas\": [0.9, 0.95]") != std::string::npos);
  CHECK(json.find("\"stage3_prefetch_bucket_size\": 50000000") != std::string::npos);
  const Config again = Config::from_string(json);
  CHECK(again.to_json() == json);
  CHECK(again.batch.train_batch_size == 32);
  CHECK(again.batch.train_micro_batch_size_per_gpu == 4);
  CHECK(again.seed == uint64_t{7});
  CHECK(again.zero.offload_param.nvme_path == "/tmp/a \"b\"");
  CHECK(again.zero.model_persistence_threshold == INT64_MAX);
}

TEST_CASE("the tables drive both directions: every member key is written back and reads back the same", "[engine]") {
  // Every member key away from its default, but the keys refused when on (DeepSpeed features Fathom
  // does not implement); bf16 in a config of its own, as fp16 and bf16 exclude each other.
  const std::vector<std::string> configs = {R"({"train_batch_size": 8, "gradient_clipping": 1.5, "steps_per_print": 5,
    "wall_clock_breakdown": true, "memory_breakdown": true, "sequence_parallel": true, "prescale_gradients": true,
    "gradient_predivide_factor": 2, "communication_data_type": "bf16",
    "fp16": {"enabled": true, "auto_cast": true, "loss_scale": 128, "initial_scale_power": 8, "loss_scale_window": 100,
      "hysteresis": 3, "consecutive_hysteresis": true, "min_loss_scale": 0.5},
    "tensorboard": {"enabled": true, "output_path": "runs", "job_name": "tb"},
    "csv_monitor": {"enabled": true, "output_path": "runs", "job_name": "csv"},
    "flops_profiler": {"enabled": true, "profile_step": 2, "module_depth": 1, "top_modules": 2, "detailed": false,
      "output_file": "flops.txt", "recompute_fwd_factor": 0.5},
    "comms_logger": {"enabled": true, "verbose": true, "prof_all": false, "debug": true, "prof_ops": ["all_reduce"]},
    "trace": {"enabled": true, "output_path": "trace"},
    "activation_checkpointing": {"partition_activations": true, "synchronize_checkpoint_boundary": true},
    "pipeline": {"partition": "uniform", "schedule": "interleaved", "virtual_stages": 2,
      "activation_checkpoint_interval": 1, "pipe_partitioned": false, "grad_partitioned": false},
    "aio": {"block_size": 4096, "queue_depth": 4, "intra_op_parallelism": 2, "single_submit": true,
      "overlap_events": false},
    "zero_optimization": {"stage": 3, "contiguous_gradients": false, "overlap_comm": false, "reduce_scatter": false,
      "reduce_bucket_size": 1, "use_multi_rank_bucket_allreduce": false, "allgather_partitions": false,
      "allgather_bucket_size": 1, "load_from_fp32_weights": false, "elastic_checkpoint": true, "sub_group_size": 1,
      "stage3_prefetch_bucket_size": 1, "stage3_param_persistence_threshold": 1,
      "stage3_model_persistence_threshold": 1, "stage3_max_live_parameters": 1, "stage3_max_reuse_distance": 1,
      "stage3_gather_16bit_weights_on_model_save": true, "stage3_module_granularity_threshold": 1,
      "stage3_use_all_reduce_for_fetch_params": true,
      "ignore_unused_parameters": false, "round_robin_gradients": true, "zero_hpz_partition_size": 0,
      "mics_shard_size": 0, "memory_efficient_linear": false, "pipeline_loading_checkpoint": true,
      "override_module_apply": false,
      "offload_param": {"device": "nvme", "nvme_path": "/nvme", "buffer_count": 1, "buffer_size": 1, "max_in_cpu": 1,
        "pin_memory": true},
      "offload_optimizer": {"device": "cpu", "nvme_path": "/nvme", "buffer_count": 1, "pin_memory": true,
        "pipeline_read": true, "pipeline_write": true, "fast_init": true, "ratio": 0.5}}})",
                                            with(R"("bf16": {"enabled": true})")};
  const std::set<std::string> refused = {"fp16.fp16_master_weights_and_grads", "bf16.immediate_grad_update",
                                         "aio.use_gds", "zero_optimization.legacy_stage1",
                                         "zero_optimization.zero_quantized_weights",
                                         "zero_optimization.zero_quantized_nontrainable_weights",
                                         "zero_optimization.zero_quantized_gradients",
                                         "zero_optimization.mics_hierarchical_params_gather"};
  const ConfigNode defaults = read_config_tree(Config::from_string(with("")).to_json(), ConfigFormat::Json, "");
  std::vector<ConfigNode> written;
  for (const std::string& text : configs) {
    const std::string json = Config::from_string(text).to_json();
    CHECK(Config::from_string(json).to_json() == json);  // what is written reads back the same
    written.push_back(read_config_tree(json, ConfigFormat::Json, ""));
  }
  const auto check = [&](const std::string& section, const auto& fields) {
    for (const auto& field : fields) {
      if (!field.read) continue;  // a key read by hand: its section's test covers it
      const std::string path = section.empty() ? field.key : section + "." + field.key;
      INFO(path);
      CHECK(value_at(written[0], path) != "");  // fails for a key the writer leaves out
      bool changed = false;
      for (const ConfigNode& tree : written) changed = changed || value_at(tree, path) != value_at(defaults, path);
      CHECK((changed || refused.count(path)));
    }
  };
  check("", kTopLevelFields);
  check("fp16", kFp16Fields);
  check("bf16", kBf16Fields);
  check("tensorboard", kMonitorFields);
  check("csv_monitor", kMonitorFields);
  check("flops_profiler", kFlopsProfilerFields);
  check("comms_logger", kCommsLoggerFields);
  check("trace", kTraceFields);
  check("activation_checkpointing", kActivationCheckpointingFields);
  check("pipeline", kPipelineFields);
  check("aio", kAioFields);
  check("zero_optimization", kZeroFields);
  check("zero_optimization.offload_param", kOffloadParamFields);
  check("zero_optimization.offload_optimizer", kOffloadOptimizerFields);
  // hybrid_engine (kHybridEngineFields) is read but not written back: to_json has never carried it.
}

TEST_CASE("tensor parallelism, sequence parallelism and activation checkpointing are read and written back",
          "[engine]") {
  const Config off = Config::from_string(R"({"train_batch_size": 8})");
  CHECK(off.tensor_parallel_size == 1);
  CHECK(!off.sequence_parallel);
  CHECK(!off.activation_checkpointing.present);
  CHECK(Config::from_string(R"({"train_batch_size": 8, "tensor_parallel": {"autotp_size": 0}})").tensor_parallel_size ==
        1);
  const Config on = Config::from_string(R"({"train_batch_size": 8, "tensor_parallel": {"autotp_size": 4,
      "tp_overlap_comm": false}, "sequence_parallel": true, "activation_checkpointing": {"partition_activations": true,
      "number_checkpoints": 12, "synchronize_checkpoint_boundary": true, "profile": false}})");
  CHECK(on.tensor_parallel_size == 4);
  CHECK(on.sequence_parallel);
  CHECK(on.activation_checkpointing.present);
  CHECK(on.activation_checkpointing.partition_activations);
  CHECK(on.activation_checkpointing.synchronize_checkpoint_boundary);
  CHECK(on.activation_checkpointing.number_checkpoints == int64_t{12});
  const Config again = Config::from_string(on.to_json());
  CHECK(again.to_json() == on.to_json());
  CHECK(again.tensor_parallel_size == 4);
  CHECK(again.activation_checkpointing.partition_activations);
}

TEST_CASE("the pipeline section: DeepSpeed's defaults accepted, Fathom's reading of stages and partition",
          "[engine]") {
  const Config absent = Config::from_string(R"({"train_batch_size": 8})");
  CHECK(absent.pipeline.stages == 0);
  CHECK(absent.pipeline.partition == "parameters");
  CHECK(absent.pipeline.schedule == "1f1b");
  // A real DeepSpeed config carries the defaults DeepSpeed itself never reads.
  const Config deepspeed = Config::from_string(with(R"("pipeline": {"stages": "auto", "partition": "best",
      "seed_layers": false, "activation_checkpoint_interval": 0, "pipe_partitioned": true, "grad_partitioned": true})"));
  CHECK(deepspeed.pipeline.stages == 0);
  CHECK(deepspeed.pipeline.partition == "parameters");
  const Config on = Config::from_string(with(R"("pipeline": {"stages": 4, "partition": "type:TransformerBlock",
      "schedule": "interleaved", "virtual_stages": 2, "activation_checkpoint_interval": 1})"));
  CHECK(on.pipeline.stages == 4);
  CHECK(on.pipeline.partition == "type:TransformerBlock");
  CHECK(on.pipeline.schedule == "interleaved");
  CHECK(on.pipeline.virtual_stages == 2);
  CHECK(on.pipeline.activation_checkpoint_interval == 1);
  const Config again = Config::from_string(on.to_json());
  CHECK(again.to_json() == on.to_json());
  CHECK(again.pipeline.virtual_stages == 2);

  CHECK(parse_error(with(R"("pipeline": {"schedule": "1f1b_interleaved"})")).rfind(
            "config error at pipeline.schedule: ", 0) == 0);
  CHECK(parse_error(with(R"("pipeline": {"virtual_stages": 2})")) ==
        "config error at pipeline.virtual_stages: 2 model chunks per stage need \"schedule\": \"interleaved\"; the "
        "1f1b schedule runs one chunk per stage");
  CHECK(parse_error(with(R"("pipeline": {"partition": "balanced"})")) ==
        "config error at pipeline.partition: \"balanced\" is not a partition method; use \"parameters\" (\"best\" "
        "means it), \"uniform\" or \"type:REGEX\"");
  CHECK(parse_error(with(R"("pipeline": {"stages": 0})")) ==
        "config error at pipeline.stages: expected an integer >= 1, got 0");
  CHECK(parse_error(with(R"("pipeline": {"seed_layers": true})")).rfind(
            "config error at pipeline.seed_layers: true is not supported", 0) == 0);
  CHECK(parse_error(with(R"("pipeline": {"num_stages": 2})")).rfind(
            "config error at pipeline.num_stages: unknown key", 0) == 0);
}

TEST_CASE("gradient averaging keys: prescaling, predivision and the communication dtype", "[engine]") {
  const auto with = [](const std::string& extra) {
    return R"({"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, )" + extra + "}";
  };
  const Config c = Config::from_string(
      with(R"("prescale_gradients": true, "gradient_predivide_factor": 4, "communication_data_type": "FP16")"));
  CHECK(c.prescale_gradients);
  CHECK(c.gradient_predivide_factor == 4.0);
  CHECK(c.communication_data_type == "fp16");  // as DeepSpeed spells it, whatever the case given
  const Config back = Config::from_string(c.to_json());
  CHECK(back.prescale_gradients);
  CHECK(back.communication_data_type == "fp16");
  CHECK(Config::from_string(with(R"("train_micro_batch_size_per_gpu": 8)")).communication_data_type.empty());
  CHECK(parse_error(with(R"("communication_data_type": "fp8")")) ==
        "config error at communication_data_type: expected one of \"fp32\", \"fp16\", \"bf16\", got \"fp8\"; did "
        "you mean \"fp32\"?");
  CHECK(parse_error(with(R"("gradient_predivide_factor": 0)")).find("gradient_predivide_factor") != std::string::npos);
}

TEST_CASE("\"auto\" filled by a program: its values replace the placeholders it knows, the rest are refused", "[engine]") {
  const std::string path = write_file("auto.json", R"({"train_batch_size": "auto",
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}}})");
  std::vector<AutoFilled> filled;
  const Config c = config_from_file_with_auto(
      path, {{"train_batch_size", {"8", "the program"}}, {"optimizer.params.lr", {"0.001", "a flag"}},
             {"optimizer.params.betas", {"[0.8, 0.9]", "the program"}}},
      &filled);
  CHECK(c.batch.train_batch_size == 8);
  REQUIRE(filled.size() == 3);
  CHECK(filled[0].line() == "train_batch_size = 8 (the program)");
  CHECK(filled[1].line() == "optimizer.params.lr = 0.001 (a flag)");
  CHECK(std::get<std::vector<double>>(c.optimizer.params.at("betas").value()) == std::vector<double>{0.8, 0.9});
  // An "auto" the program has no value for is refused, naming the key (and line).
  const std::string error = error_of([&] { config_from_file_with_auto(path, {{"train_batch_size", {"8", "x"}}}, nullptr); });
  CHECK(error.find("optimizer.params.lr") != std::string::npos);
  CHECK(error.find("\"auto\" is a placeholder") != std::string::npos);
}

TEST_CASE("batch sizes whose product overflows are errors naming them, never a wrapped value", "[engine]") {
  // Before: a SIGFPE in the sample map, or a product that wrapped to exactly 8 and passed.
  CHECK(error_of([] {
          resolve_batch({0, 4, 4611686018427387904, 0}, 1);
        }) == "config error: gradient_accumulation_steps (4611686018427387904) is more than 2147483648 samples; use a "
              "real batch size");
  CHECK(error_of([] { resolve_batch({8, 4, 4611686018427387906, 0}, 1); }).find("gradient_accumulation_steps") !=
        std::string::npos);
  CHECK(error_of([] { resolve_batch({0, 65536, 65536, 0}, 4); }) ==
        "config error: train_micro_batch_size_per_gpu (65536) * gradient_accumulation_steps (65536) * data-parallel "
        "world size (4) is more than 2147483648 samples per optimizer step; use batch sizes whose product is at most "
        "that");
  CHECK(resolve_batch({0, 4, 4, 0}, 2).train_batch_size == 32);
}

TEST_CASE("the checker reports keyed problems and then one that names no key, then stops", "[engine]") {
  const std::string path = write_file("check.json", R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4,
  "steps_per_print": 0, "fp16": {"enabled": false, "lose_scale": 1}})");
  const ConfigCheck check = check_config_file(path, 1);
  CHECK_FALSE(check.ok());
  CHECK_FALSE(check.config.has_value());
  REQUIRE(check.problems.size() == 3);
  CHECK(check.problems[0].find("steps_per_print") != std::string::npos);
  CHECK(check.problems[1].find("fp16.lose_scale") != std::string::npos);
  CHECK(check.problems[2].find("train_batch_size (10) is not a multiple of") != std::string::npos);  // no key: the end
  CHECK(check_config_file(write_file("good.json", R"({"train_batch_size": 8})"), 2).config->batch.train_micro_batch_size_per_gpu == 4);
  CHECK(check_config_file("no_such_config.json", 1).problems.size() == 1);
}

TEST_CASE("the checker reports an unsupported optimizer or scheduler type once, without a false \"type is missing\"", "[engine]") {
  const ConfigCheck check = check_config_file(write_file("types.json", R"({"train_batch_size": 8,
  "optimizer": {"type": "adamw_torch", "params": {"lr": 0.001}}, "scheduler": {"type": "cosine"}})"), 1);
  REQUIRE(check.problems.size() == 2);
  CHECK(check.problems[0].find("optimizer.type: \"adamw_torch\" is not supported") != std::string::npos);
  CHECK(check.problems[1].find("scheduler.type: \"cosine\" is not supported") != std::string::npos);
  for (const std::string& problem : check.problems) CHECK(problem.find("is missing") == std::string::npos);
}

TEST_CASE("optimizer offload at stage 0 and ZeRO-3 with pipeline stages are refused by the config itself", "[engine]") {
  CHECK(parse_error(with(R"("zero_optimization": {"offload_optimizer": {"device": "cpu"}})")) ==
        "config error at zero_optimization.offload_optimizer.device: \"cpu\" offloads ZeRO's optimizer shard, but "
        "zero_optimization.stage is 0; use stage 1, 2 or 3");
  CHECK(parse_error(with(R"("zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}})"))
            .find("config error at zero_optimization.offload_optimizer.ratio: 0.5 (a partial offload) needs") == 0);
  // Refused while parsing, before anything is partitioned (threshold 0 as every stage-3 config here).
  CHECK(parse_error(with(R"("pipeline": {"stages": 2},
      "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0})")) ==
        std::string("config error at zero_optimization.stage: ") + kZero3WithPipeline);
  CHECK(parse_error(with(R"("pipeline": {"stages": 2}, "zero_optimization": {"stage": 2})")) == "(no error)");
}

TEST_CASE("offload_param below stage 3 is refused naming the stage (DeepSpeed ignores it there)", "[engine]") {
  CHECK(parse_error(with(R"("zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}})")) ==
        "config error at zero_optimization.offload_param.device: \"cpu\" offloads ZeRO stage 3's parameter shards, "
        "but zero_optimization.stage is 2 (DeepSpeed ignores it below stage 3); set \"stage\": 3 or remove it");
  CHECK(parse_error(with(R"("zero_optimization": {"stage": 1, "cpu_offload_param": true})")) ==
        "config error at zero_optimization.cpu_offload_param: (read as offload_param.device) \"cpu\" offloads ZeRO "
        "stage 3's parameter shards, but zero_optimization.stage is 1 (DeepSpeed ignores it below stage 3); set "
        "\"stage\": 3 or remove it");
  CHECK(parse_error(with(R"("zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}})")) == "(no error)");
}

TEST_CASE("aio: DeepSpeed's keys and defaults, thread_count as the older name, GDS refused", "[engine]") {
  const Config defaults = Config::from_string(with(""));
  CHECK(defaults.aio.block_size == 1048576);
  CHECK(defaults.aio.queue_depth == 8);
  CHECK(defaults.aio.intra_op_parallelism == 1);
  CHECK_FALSE(defaults.aio.single_submit);
  CHECK(defaults.aio.overlap_events);
  const Config tuned = Config::from_string(with(R"("aio": {"block_size": 262144, "queue_depth": 32,
    "intra_op_parallelism": 2, "single_submit": true, "overlap_events": false, "use_gds": false})"));
  CHECK(tuned.aio.block_size == 262144);
  CHECK(tuned.aio.queue_depth == 32);
  CHECK(tuned.aio.intra_op_parallelism == 2);
  CHECK(tuned.aio.single_submit);
  CHECK_FALSE(tuned.aio.overlap_events);
  CHECK(Config::from_string(tuned.to_json()).aio.queue_depth == 32);  // the recorded config keeps it
  CHECK(parse_error(with(R"("aio": {"thread_count": 2, "intra_op_parallelism": 2})")) ==
        "config error at aio.thread_count: is DeepSpeed's older name of \"intra_op_parallelism\", which is given too "
        "(line 1); keep \"intra_op_parallelism\"");
  CHECK(parse_error(with(R"("aio": {"use_gds": true})")).find("GPUDirect Storage") != std::string::npos);
  CHECK(parse_error(with(R"("aio": {"queue_depth": 0})")) ==
        "config error at aio.queue_depth: expected an integer >= 1, got 0");
  CHECK(parse_error(with(R"("aio": {"queue_dpth": 4})")).find("did you mean \"queue_depth\"") != std::string::npos);
}
