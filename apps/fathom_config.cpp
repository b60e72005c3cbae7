// fathom-config check: validates a DeepSpeed-style config without training.
//
//   fathom-config check FILE [--world-size N] [--arch A] [--preset P | --model DIR] [--n-embd N] [--steps N] [--strict]
//
// Prints every problem in the file at once (exit 1), or the config as fathom-train would run it
// (exit 0): the batch sizes for N data-parallel ranks, every default filled in, each "auto" and
// what it became (fathom-train's values for that model width and --steps), and the sections
// fathom-train would add. It reads the file through fathom-train's own function, so a config
// that trains passes the check and one that fails it does not train.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "launcher/text_parsing.h"
#include "apps/train/train_config.h"
#include "models/model_spec.h"

using namespace fathom;

namespace {

const char* kUsage = R"(usage: fathom-config check FILE [--world-size N] [--arch A] [--preset P | --model DIR] [--n-embd N] [--steps N] [--strict]

Validates a DeepSpeed-style JSON or YAML config without training: prints every problem in it
(exit 1), or the config as fathom-train would run it (exit 0).
  --world-size N   data-parallel ranks to resolve the batch sizes for (default 1)
  --arch A         the architecture of --preset: gpt2 (default), llama, qwen2 or mistral
  --preset P       the preset whose width fills "auto" bucket sizes (default small)
  --model DIR      a Hugging Face model folder whose hidden_size fills them instead
  --n-embd N       that width, explicitly
  --steps N        the run's --steps, for "auto" schedule lengths (default 300)
  --strict         also refuse unknown top-level keys that fathom-train ignores (as DeepSpeed does)
)";

int64_t positive(const std::string& text, const std::string& flag) {
  const std::optional<int> value = launcher::parse_non_negative_int(text);
  FATHOM_CHECK(value && *value > 0, flag, " takes a whole number > 0, got \"", text, "\"");
  return *value;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
      std::cout << kUsage;
      return args.empty() ? 2 : 0;
    }
    FATHOM_CHECK(args[0] == "check", "unknown command \"", args[0], "\"; the command is: fathom-config check FILE");
    std::string path;
    int64_t world = 1, steps = 300, width = 0;
    std::string preset = "small", arch = "gpt2", model_dir;
    bool strict = false;
    for (size_t i = 1; i < args.size(); ++i) {
      const auto value = [&] {
        FATHOM_CHECK(i + 1 < args.size(), args[i], " needs a value; see fathom-config --help");
        return args[++i];
      };
      if (args[i] == "--world-size") world = positive(value(), "--world-size");
      else if (args[i] == "--steps") steps = positive(value(), "--steps");
      else if (args[i] == "--n-embd") width = positive(value(), "--n-embd");
      else if (args[i] == "--preset") preset = value();
      else if (args[i] == "--arch") arch = value();
      else if (args[i] == "--model") model_dir = value();
      else if (args[i] == "--strict") strict = true;
      else if (path.empty() && args[i].rfind("--", 0) != 0) path = args[i];
      else FATHOM_FAIL("unknown option ", args[i], "; see fathom-config --help");
    }
    FATHOM_CHECK(!path.empty(), "give the config file: fathom-config check FILE");
    if (width == 0)
      width = (model_dir.empty() ? models::ModelSpec::preset(arch, preset) : models::ModelSpec::from_folder(model_dir))
                  .hidden_size();

    const Config defaults = apps::builtin_train_config(steps);
    ConfigCheck check =
        check_config_file(path, world, apps::train_auto_values(defaults, width, steps, static_cast<int>(world)));
    if (strict && check.config)
      for (const std::string& key : check.config->ignored_keys)
        check.problems.push_back("config error at " + key + ": unknown key (--strict; without it the key is ignored, "
                                 "as DeepSpeed ignores it)");
    if (!check.ok()) {
      std::printf("fathom-config: %s has %zu problem%s:\n", path.c_str(), check.problems.size(),
                  check.problems.size() == 1 ? "" : "s");
      for (const std::string& problem : check.problems) std::printf("  %s\n", problem.c_str());
      return 1;
    }
    std::vector<std::string> log;
    const Config config = apps::finish_train_config(check, defaults, &log);
    std::printf("fathom-config: %s is a valid config for %lld data-parallel rank%s\n", path.c_str(),
                static_cast<long long>(world), world == 1 ? "" : "s");
    for (const std::string& notice : config.notices) std::printf("fathom-config: %s\n", notice.c_str());
    for (const std::string& line : log) std::printf("fathom-config: %s\n", line.c_str());
    std::printf("%s", config.to_json().c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "fathom-config: %s\n", e.message().c_str());
    return 2;
  }
}
