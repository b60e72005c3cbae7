#include "launcher/rank_environment.h"

#include <algorithm>
#include <array>
#include <filesystem>

#include "core/error.h"
#include "launcher/text_parsing.h"

extern char** environ;

namespace fathom::launcher {
namespace {

constexpr std::array<std::string_view, 3> kForwardedPrefixes = {"FATHOM_", "NCCL_", "OMP_"};

bool is_variable_name(std::string_view name) {
  const auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return !name.empty() && letter(name.front()) &&
         std::all_of(name.begin(), name.end(), [&](char c) { return letter(c) || digit(c); });
}

}  // namespace

std::vector<EnvVar> process_environment() {
  std::vector<EnvVar> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    const size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    environment.push_back({std::string(text.substr(0, equals)), std::string(text.substr(equals + 1))});
  }
  return environment;
}

const std::string* find_variable(const std::vector<EnvVar>& environment, std::string_view name) {
  const auto found =
      std::find_if(environment.begin(), environment.end(), [&](const EnvVar& var) { return var.name == name; });
  return found == environment.end() ? nullptr : &found->value;
}

void set_variable(std::vector<EnvVar>& variables, const std::string& name, const std::string& value) {
  const auto found =
      std::find_if(variables.begin(), variables.end(), [&](const EnvVar& var) { return var.name == name; });
  if (found != variables.end()) found->value = value;
  else variables.push_back({name, value});
}

std::vector<EnvVar> parse_env_file(std::string_view text, std::string_view source) {
  std::vector<EnvVar> variables;
  const std::vector<std::string_view> lines = split(text, '\n');
  for (size_t index = 0; index < lines.size(); ++index) {
    const std::string_view content = trim(lines[index]);
    if (content.empty() || content.front() == '#') continue;
    const size_t equals = content.find('=');
    const std::string_view name = equals == std::string_view::npos ? content : content.substr(0, equals);
    FATHOM_CHECK(equals != std::string_view::npos && is_variable_name(name),
                 line_error("env file", source, static_cast<int>(index) + 1, content,
                            "expected KEY=VALUE, KEY made of letters, digits and '_' (no spaces, no \"export\")"));
    set_variable(variables, std::string(name), std::string(trim(content.substr(equals + 1))));
  }
  return variables;
}

std::vector<EnvVar> read_env_file_if_present(const std::string& path) {
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) return {};
  return parse_env_file(read_text_file(path, "env file"), path);
}

std::vector<EnvVar> forwarded_variables(const std::vector<EnvVar>& environment) {
  std::vector<EnvVar> forwarded;
  for (const EnvVar& var : environment)
    if (std::any_of(kForwardedPrefixes.begin(), kForwardedPrefixes.end(),
                    [&](std::string_view prefix) { return var.name.starts_with(prefix); }))
      forwarded.push_back(var);
  std::sort(forwarded.begin(), forwarded.end(), [](const EnvVar& a, const EnvVar& b) { return a.name < b.name; });
  return forwarded;
}

std::vector<EnvVar> rank_environment(const std::vector<EnvVar>& launcher_environment,
                                     const std::vector<EnvVar>& env_file, const std::string& master_addr,
                                     int master_port) {
  std::vector<EnvVar> variables = forwarded_variables(launcher_environment);
  for (const EnvVar& var : env_file) set_variable(variables, var.name, var.value);
  set_variable(variables, "MASTER_ADDR", master_addr);
  set_variable(variables, "MASTER_PORT", std::to_string(master_port));
  return variables;
}

}  // namespace fathom::launcher
