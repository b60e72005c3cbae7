#include "engine/config/schema.h"

#include <algorithm>
#include <cctype>

#include "core/did_you_mean.h"

namespace fathom {
namespace {

// DeepSpeed v0.16's defaults (deepspeed/runtime/constants.py, config.py and the section
// configs) for the keys Fathom does not implement. A key is accepted while its value equals
// the default here; in an object, every sub-key must be one listed here and equal its default.
constexpr const char* kDefaults = R"({
  "sparse_gradients": false,
  "dump_state": false,
  "disable_allgather": false,
  "graph_harvesting": false,
  "use_data_before_expert_parallelism": false,
  "seq_parallel_comm_data_type": "fp32",
  "checkpoint": {
    "tag_validation": "WARN", "load_universal": false, "use_node_local_storage": false,
    "parallel_write": {"pipeline_stage": false}
  }
})";

// Sections that DeepSpeed turns on with "enabled": true (anywhere inside: compression and
// data-efficiency techniques each have their own). The object lists the sub-keys DeepSpeed
// accepts; null means the section's schema is too large to mirror, so its sub-keys are not
// checked (only its "enabled" flags are).
constexpr const char* kEnabledSections = R"({
  "amp": null,
  "wandb": {"enabled": false, "group": null, "team": null, "project": "deepspeed"},
  "comet": null,
  "eigenvalue": {
    "enabled": false, "verbose": false, "max_iter": 100, "tol": 0.01, "stability": 0.000001,
    "gas_boundary_resolution": 1, "layer_name": "bert.encoder.layer", "layer_num": 0
  },
  "progressive_layer_drop": {"enabled": false, "theta": 1.0, "gamma": 0.001},
  "elasticity": null,
  "autotuning": null,
  "data_efficiency": null,
  "curriculum_learning": null,
  "nebula": null,
  "compression_training": null,
  "quantize_training": null
})";

// Sections whose mere presence turns a feature on.
const std::vector<std::string> kPresenceSections = {"sparse_attention", "weight_quantization"};

// Keys with no effect in Fathom, accepted with any value of their type.
//   zero_allow_untested_optimizer / zero_force_ds_cpu_optimizer: every Fathom optimizer but
//   Lamb works with every ZeRO stage (Lamb is refused by name), and Fathom has one CPU optimizer; vocabulary_size: DeepSpeed only
//   warns with it; timers: DeepSpeed's throughput-timer synchronisation.
const std::vector<std::string> kNoEffect = {"zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer",
                                            "vocabulary_size", "timers"};

// What each key turns on, for messages.
std::string feature_name(const std::string& key) {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"sparse_gradients", "sparse gradients"},
      {"dump_state", "state dumping"},
      {"disable_allgather", "all-gather replacement"},
      {"graph_harvesting", "graph harvesting"},
      {"use_data_before_expert_parallelism", "expert parallelism"},
      {"seq_parallel_comm_data_type", "sequence parallelism"},
      {"checkpoint", "checkpoint options"},
      {"amp", "NVIDIA Apex AMP"},
      {"wandb", "Weights & Biases monitor"},
      {"comet", "Comet monitor"},
      {"eigenvalue", "eigenvalue computation"},
      {"progressive_layer_drop", "progressive layer drop"},
      {"elasticity", "elastic training"},
      {"autotuning", "autotuning"},
      {"data_efficiency", "data efficiency library"},
      {"curriculum_learning", "curriculum learning"},
      {"nebula", "Nebula checkpointing"},
      {"compression_training", "compression training"},
      {"quantize_training", "quantization-aware training"},
      {"sparse_attention", "sparse attention"},
      {"weight_quantization", "weight quantization"},
  };
  for (const auto& [name, feature] : names)
    if (name == key) return feature;
  return key;
}

const ConfigNode& defaults() {
  static const ConfigNode tree = read_config_tree(kDefaults, ConfigFormat::Json, "config_schema.cpp");
  return tree;
}

const ConfigNode& enabled_sections() {
  static const ConfigNode tree = read_config_tree(kEnabledSections, ConfigFormat::Json, "config_schema.cpp");
  return tree;
}

std::vector<std::string> keys_of(const ConfigNode& map) {
  std::vector<std::string> keys;
  for (const ConfigMember& member : map.members) keys.push_back(member.key);
  return keys;
}

bool iequals(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Equal as config values: numbers numerically (1 == 1.0), strings ignoring case (DeepSpeed
// upper-cases tag_validation), lists element by element.
bool same_value(const ConfigNode& given, const ConfigNode& fallback) {
  if (given.is_null() || fallback.is_null()) return given.is_null() && fallback.is_null();
  if (given.is_sequence() && fallback.is_sequence()) {
    if (given.items.size() != fallback.items.size()) return false;
    for (size_t i = 0; i < given.items.size(); ++i)
      if (!same_value(given.items[i], fallback.items[i])) return false;
    return true;
  }
  if (!given.is_scalar() || !fallback.is_scalar()) return false;
  if (const auto number = config_number(fallback)) return config_number(given) == number;
  if (const auto flag = config_bool(fallback)) return config_bool(given) == flag;
  return iequals(given.text, fallback.text);
}

std::string not_supported(const std::string& key, const std::string& fix) {
  return "not supported (Fathom does not implement DeepSpeed's " + feature_name(key) + "); " + fix;
}

// `section` must hold only `fallback`'s keys, each at its default value.
void check_defaults(const ConfigSection& section, const ConfigNode& fallback, const std::string& top_key) {
  section.check_keys(keys_of(fallback));
  for (const ConfigMember& member : section.node()->members) {
    // Keys inside these sections that parse_config reads itself.
    const std::string path = section.path_of(member.key);
    if (path == "checkpoint.tag_validation") continue;
    const ConfigNode& expected = *fallback.find(member.key);
    if (expected.is_map()) {
      check_defaults(section.section(member.key), expected, top_key);
    } else if (!same_value(member.value, expected)) {
      section.fail(member.key, describe_config_value(member.value) + " is " +
                                   not_supported(top_key, "remove the key or use " + describe_config_value(expected)));
    }
  }
}

// The first "enabled": true anywhere inside `node`; throws naming it.
void reject_enabled(const ConfigSection& section, const std::string& top_key) {
  for (const ConfigMember& member : section.node()->members) {
    if (member.value.is_map()) {
      reject_enabled(section.section(member.key), top_key);
    } else if (member.key == "enabled" && section.boolean("enabled", false)) {
      // A C++ library has no client for these services; TensorBoard's files import into them.
      const bool service = top_key == "wandb" || top_key == "comet";
      section.fail("enabled", "true is " + not_supported(top_key, service ? "it needs the service's network client. Write "
                   "TensorBoard files instead (\"tensorboard\": {\"enabled\": true}) and import them (wandb sync "
                   "--sync-tensorboard DIR)" : "remove the section or set it to false"));
    }
  }
}

}  // namespace

const std::vector<std::string>& deepspeed_only_config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> all = keys_of(defaults());
    for (const std::string& key : keys_of(enabled_sections())) all.push_back(key);
    all.insert(all.end(), kPresenceSections.begin(), kPresenceSections.end());
    all.insert(all.end(), kNoEffect.begin(), kNoEffect.end());
    return all;
  }();
  return keys;
}

void check_deepspeed_only_keys(const ConfigSection& root) {
  if (!root.present()) return;
  for (const ConfigMember& member : root.node()->members) {
    const std::string& key = member.key;
    const ConfigNode* value = root.find(key);
    if (!value) continue;  // null: DeepSpeed's default
    if (const ConfigNode* fallback = defaults().find(key)) {
      if (fallback->is_map()) {
        check_defaults(root.section(key), *fallback, key);
      } else if (!same_value(*value, *fallback)) {
        root.fail(key, describe_config_value(*value) + " is " +
                           not_supported(key, "remove the key or use " + describe_config_value(*fallback)));
      }
    } else if (const ConfigNode* known = enabled_sections().find(key)) {
      const ConfigSection section = root.section(key);
      if (known->is_map()) section.check_keys(keys_of(*known));
      reject_enabled(section, key);
    } else if (std::find(kPresenceSections.begin(), kPresenceSections.end(), key) != kPresenceSections.end()) {
      if (!(value->is_map() && value->members.empty())) root.fail(key, not_supported(key, "remove the section"));
    } else if (key == "zero_allow_untested_optimizer" || key == "zero_force_ds_cpu_optimizer") {
      root.boolean(key, false);  // type check only
    } else if (key == "vocabulary_size") {
      root.integer(key, 0, 0);
    }
  }
}

}  // namespace fathom
