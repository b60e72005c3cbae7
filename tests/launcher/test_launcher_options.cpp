#include <catch2/catch.hpp>

#include "launcher/launcher_options.h"
#include "test_util.h"

using namespace fathom::launcher;
using fathom::testing::error_of;
using Words = std::vector<std::string>;

TEST_CASE("launcher options: the first non-option starts the program", "[launcher]") {
  const LauncherOptions options = parse_launcher_options(
      {"--hostfile", "hosts", "-i", "w0:0", "--num_nodes=2", "--num_gpus", "3", "--master_addr", "10.0.0.1",
       "--master_port", "6000", "--launcher_args", " --mca  btl tcp ", "--dry-run", "train", "--num_procs", "9", "-x"});
  REQUIRE(options.hostfile == "hosts");
  REQUIRE(options.selection.include == "w0:0");
  REQUIRE(options.selection.num_nodes == 2);
  REQUIRE(options.selection.num_procs == 3);
  REQUIRE(options.master_addr == "10.0.0.1");
  REQUIRE(options.master_port == 6000);
  REQUIRE(options.launcher_args == Words{"--mca", "btl", "tcp"});
  REQUIRE(options.dry_run);
  REQUIRE(options.program == Words{"train", "--num_procs", "9", "-x"});
}

TEST_CASE("launcher options: defaults, --exclude, -- and repeated --launcher_args", "[launcher]") {
  const LauncherOptions defaults = parse_launcher_options({"./x"});
  REQUIRE(defaults.hostfile.empty());
  REQUIRE(!defaults.selection.num_procs);
  REQUIRE(defaults.master_port == 29500);
  REQUIRE(!defaults.dry_run);
  const LauncherOptions options =
      parse_launcher_options({"-e", "w1", "--launcher_args=-v", "--launcher_args", "--tag-output", "--", "-prog"});
  REQUIRE(options.selection.exclude == "w1");
  REQUIRE(options.launcher_args == Words{"-v", "--tag-output"});
  REQUIRE(options.program == Words{"-prog"});
  REQUIRE(parse_launcher_options({"--num_procs", "2", "-h"}).help);
}

TEST_CASE("launcher options: errors", "[launcher]") {
  REQUIRE(error_of([] { parse_launcher_options({}); }) == "no program given; usage: fathom [options] program [args...]");
  REQUIRE(error_of([] { parse_launcher_options({"--dry-run"}); }) ==
          "no program given; usage: fathom [options] program [args...]");
  REQUIRE(error_of([] { parse_launcher_options({"--nodes", "2", "x"}); }) ==
          "unknown option --nodes; see fathom --help");
  REQUIRE(error_of([] { parse_launcher_options({"--dry-run=1", "x"}); }) ==
          "unknown option --dry-run=1; see fathom --help");
  REQUIRE(error_of([] { parse_launcher_options({"--hostfile"}); }) == "--hostfile needs a value; see fathom --help");
  REQUIRE(error_of([] { parse_launcher_options({"--include", "", "x"}); }) == "--include needs a non-empty value");
  REQUIRE(error_of([] { parse_launcher_options({"--num_procs", "0", "x"}); }) ==
          "--num_procs must be an integer from 1 to 1048576, not \"0\"");
  REQUIRE(error_of([] { parse_launcher_options({"--num_gpus=two", "x"}); }) ==
          "--num_gpus must be an integer from 1 to 1048576, not \"two\"");
  REQUIRE(error_of([] { parse_launcher_options({"--master_port", "70000", "x"}); }) ==
          "--master_port must be an integer from 1 to 65535, not \"70000\"");
}
