#include "apps/train/train_config.h"

#include <algorithm>
#include <variant>

#include "core/json_writer.h"
#include "engine/config/parse.h"
#include "engine/config/section.h"

namespace fathom::apps {
namespace {

const char* kDefaultConfig = R"({
  # fathom-train's built-in config (DeepSpeed's key names; --config replaces it). The global
  # batch is fixed, so the same command at N ranks is the same job (N must divide 16).
  "train_batch_size": 16,
  "gradient_accumulation_steps": 1,
  "optimizer": {"type": "AdamW", "params": {"lr": 2e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
  "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": @STEPS@, "warmup_num_steps": @WARMUP@,
                                                     "warmup_type": "linear", "cos_min_ratio": 0.1}},
  "gradient_clipping": 1.0,
  "steps_per_print": 10,
  "seed": 1337
})";

}  // namespace

int64_t builtin_warmup_steps(int64_t steps) {
  int64_t warmup = std::clamp<int64_t>(steps / 10, 2, 20);
  if (warmup == steps) ++warmup;
  return warmup;
}

Config builtin_train_config(int64_t steps) {
  std::string text = kDefaultConfig;
  const int64_t warmup = builtin_warmup_steps(steps);
  // A run shorter than the shortest warm-up (2 steps) still gets a whole schedule: no warning.
  text.replace(text.find("@STEPS@"), 7, std::to_string(std::max(steps, warmup + 1)));
  text.replace(text.find("@WARMUP@"), 8, std::to_string(warmup));
  return Config::from_string(text);
}

AutoValues train_auto_values(const Config& defaults, int64_t hidden, int64_t steps, int world) {
  const int64_t warmup = builtin_warmup_steps(steps);
  const auto number = [](double value) { return json_number(value); };
  const auto integer = [](int64_t value) { return std::to_string(value); };
  const BatchConfig batch = resolve_batch(defaults.batch, world);
  const int64_t micro = batch.train_micro_batch_size_per_gpu, accumulation = batch.gradient_accumulation_steps;
  const std::string builtin = "fathom-train's default";
  AutoValues v = {
      {"train_micro_batch_size_per_gpu", {integer(micro), builtin}},
      {"gradient_accumulation_steps", {integer(accumulation), builtin}},
      {"train_batch_size", {integer(micro * accumulation * world),
                            "micro-batch x accumulation x " + std::to_string(world) + (world == 1 ? " rank" : " ranks")}},
      {"gradient_clipping", {number(defaults.gradient_clipping), builtin}},
      {"fp16.enabled", {"false", "fathom-train trains in f32"}},
      {"bf16.enabled", {"false", "fathom-train trains in f32"}},
      {"scheduler.params.warmup_num_steps", {integer(warmup), builtin + " for --steps " + std::to_string(steps)}},
      {"scheduler.params.total_num_steps", {integer(steps), "--steps"}},
      {"scheduler.params.warmup_min_lr", {"0.0", builtin}},
      {"zero_optimization.reduce_bucket_size", {integer(hidden * hidden), "hidden size squared"}},
      {"zero_optimization.stage3_prefetch_bucket_size",
       {integer(static_cast<int64_t>(0.9 * static_cast<double>(hidden * hidden))), "0.9 x hidden size squared"}},
      {"zero_optimization.stage3_param_persistence_threshold", {integer(10 * hidden), "10 x hidden size"}},
  };
  for (const auto& [name, value] : defaults.optimizer.params) {
    JsonWriter w(JsonWriter::Layout::Inline);
    if (const double* real = std::get_if<double>(&value.value())) w.value(*real);
    else if (const bool* flag = std::get_if<bool>(&value.value())) w.value(*flag);
    else {
      w.begin_array();
      for (double item : std::get<std::vector<double>>(value.value())) w.value(item);
      w.end_array();
    }
    v["optimizer.params." + name] = {w.str(), builtin};
  }
  v["optimizer.params.eps"] = {"1e-08", builtin};
  if (const auto lr = v.find("optimizer.params.lr"); lr != v.end())
    v["scheduler.params.warmup_max_lr"] = {lr->second.json, builtin + " lr"};
  return v;
}

int config_tensor_parallel_size(const std::string& path) {
  if (path.empty()) return 1;
  const ConfigNode root = read_config_file(path);
  const ConfigSection tensor_parallel = ConfigSection(&root, "", path).section("tensor_parallel");
  return static_cast<int>(std::max<int64_t>(1, tensor_parallel.integer("autotp_size", 0, 0)));
}

int config_pipeline_stages(const std::string& path) {
  if (path.empty()) return 1;
  const ConfigNode root = read_config_file(path);
  const ConfigSection pipeline = ConfigSection(&root, "", path).section("pipeline");
  const ConfigNode* stages = pipeline.find("stages");
  if (!stages || (stages->is_scalar() && stages->text == "auto")) return 1;
  return static_cast<int>(pipeline.integer("stages", 1, 1));
}

Config train_config(const std::string& path, int64_t hidden, int64_t steps, int world,
                    std::vector<std::string>* log) {
  const Config defaults = builtin_train_config(steps);
  if (path.empty()) return defaults;
  ConfigCheck check = check_config_file(path, world, train_auto_values(defaults, hidden, steps, world));
  if (!check.ok()) {
    std::string all = std::to_string(check.problems.size()) + (check.problems.size() == 1 ? " problem" : " problems") +
                      " in " + path + " (fathom-config check " + path + " lists them too):";
    for (const std::string& problem : check.problems) all += "\n  " + problem;
    FATHOM_FAIL(all);
  }
  return finish_train_config(check, defaults, log);
}

Config finish_train_config(const ConfigCheck& check, const Config& defaults, std::vector<std::string>* log) {
  Config config = *check.config;
  for (const AutoFilled& filled : check.filled) log->push_back("\"auto\" " + filled.line());
  // What a given config lacks, fathom-train fills from its own defaults, and says so (the
  // library keeps refusing a config without an optimizer: only a program knows its defaults).
  // The default schedule goes with the default optimizer only: a config that names its optimizer
  // and no scheduler trains at the optimizer's constant lr, as under DeepSpeed.
  if (config.optimizer.type.empty()) {
    config.optimizer = defaults.optimizer;
    log->push_back("optimizer: " + config.optimizer.to_json() + " (fathom-train's default: the config has none)");
    if (config.scheduler.type.empty()) {
      config.scheduler = defaults.scheduler;
      log->push_back("scheduler: " + config.scheduler.to_json() + " (fathom-train's default, with its optimizer)");
    }
  } else if (config.scheduler.type.empty()) {
    log->push_back("scheduler: none: the learning rate stays at the optimizer's lr, as under DeepSpeed");
  }
  return config;
}

}  // namespace fathom::apps
