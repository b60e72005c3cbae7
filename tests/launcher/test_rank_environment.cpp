#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "launcher/rank_environment.h"
#include "test_util.h"

using namespace fathom::launcher;
using fathom::testing::error_of;
using Variables = std::vector<EnvVar>;

TEST_CASE("rank environment: forwards FATHOM_, NCCL_ and OMP_ variables, sorted", "[launcher]") {
  const Variables shell = {{"PATH", "/bin"},          {"OMP_NUM_THREADS", "4"}, {"NCCL_DEBUG", "INFO"},
                           {"OMPI_MCA_x", "1"},       {"FATHOM_LOG", "debug"},  {"MY_FATHOM_X", "no"},
                           {"fathom_lower", "no"},    {"NCCL", "no"}};
  REQUIRE(forwarded_variables(shell) ==
          Variables{{"FATHOM_LOG", "debug"}, {"NCCL_DEBUG", "INFO"}, {"OMP_NUM_THREADS", "4"}});
}

TEST_CASE("rank environment: .fathom_env overrides the shell; the master address overrides both", "[launcher]") {
  const Variables shell = {{"NCCL_DEBUG", "INFO"}, {"MASTER_ADDR", "ignored"}, {"OMP_NUM_THREADS", "4"}};
  const Variables env_file = {{"NCCL_DEBUG", "WARN"}, {"HF_HOME", "/data"}, {"MASTER_PORT", "1"}};
  REQUIRE(rank_environment(shell, env_file, "worker-0", 29500) ==
          Variables{{"NCCL_DEBUG", "WARN"},
                    {"OMP_NUM_THREADS", "4"},
                    {"HF_HOME", "/data"},
                    {"MASTER_PORT", "29500"},
                    {"MASTER_ADDR", "worker-0"}});
}

TEST_CASE("rank environment: .fathom_env lines", "[launcher]") {
  const char* text =
      "# comment\n"
      "\n"
      "NCCL_IB_DISABLE=1\n"
      "  PYTHONPATH=/a:/b  \n"
      "EMPTY=\n"
      "URL=http://host/x#frag=1\n"
      "QUOTED=\"kept\"\n"
      "SPACED=   value with inner spaces \t\n"
      "NCCL_IB_DISABLE=0\n";
  REQUIRE(parse_env_file(text, ".fathom_env") == Variables{{"NCCL_IB_DISABLE", "0"},
                                                           {"PYTHONPATH", "/a:/b"},
                                                           {"EMPTY", ""},
                                                           {"URL", "http://host/x#frag=1"},
                                                           {"QUOTED", "\"kept\""},
                                                           {"SPACED", "value with inner spaces"}});
}

TEST_CASE("rank environment: a bad .fathom_env line names the file and line", "[launcher]") {
  const std::string problem = "\": expected KEY=VALUE, KEY made of letters, digits and '_' (no spaces, no \"export\")";
  for (const char* line : {"JUST_A_NAME", "export A=1", "A B=1", "1A=2", "=value", "A-B=1"})
    REQUIRE(error_of([&] { parse_env_file(std::string("OK=1\n# c\n") + line + "\n", ".fathom_env"); }) ==
            std::string("env file .fathom_env:3: \"") + line + problem);
}

TEST_CASE("rank environment: a missing .fathom_env is no error", "[launcher]") {
  REQUIRE(read_env_file_if_present("/nonexistent/.fathom_env").empty());
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "fathom_test_env_file";
  std::ofstream(path) << "A=1\n";
  REQUIRE(read_env_file_if_present(path.string()) == Variables{{"A", "1"}});
  std::filesystem::remove(path);
}

TEST_CASE("rank environment: the process environment and lookups", "[launcher]") {
  setenv("FATHOM_TEST_RANK_ENV", "a=b", 1);
  const Variables environment = process_environment();
  REQUIRE(find_variable(environment, "FATHOM_TEST_RANK_ENV") != nullptr);
  REQUIRE(*find_variable(environment, "FATHOM_TEST_RANK_ENV") == "a=b");
  REQUIRE(find_variable(environment, "FATHOM_TEST_NOT_SET") == nullptr);
  unsetenv("FATHOM_TEST_RANK_ENV");
}
