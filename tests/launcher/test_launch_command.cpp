#include <catch2/catch.hpp>

#include "launcher/launch_command.h"
#include "test_util.h"

using namespace fathom::launcher;
using Words = std::vector<std::string>;

namespace {

LaunchSpec local_spec(int ranks) {
  LaunchSpec spec;
  spec.local_cores = 2;
  spec.hosts = {{"localhost", {}}};
  for (int slot = 0; slot < ranks; ++slot) spec.hosts[0].slots.push_back(slot);
  spec.environment = {{"MASTER_ADDR", "localhost"}, {"MASTER_PORT", "29500"}};
  spec.program = {"./x", "a", "b"};
  return spec;
}

}  // namespace

TEST_CASE("launch command: a local run is one app context without --host", "[launcher]") {
  REQUIRE(mpirun_command(local_spec(2)) == Words{"mpirun", "--bind-to", "none", "-np", "2", "-x",
                                                 "MASTER_ADDR=localhost", "-x", "MASTER_PORT=29500", "./x", "a", "b"});
}

TEST_CASE("launch command: root, oversubscription and a custom mpirun", "[launcher]") {
  LaunchSpec spec = local_spec(3);
  spec.mpirun = "/opt/ompi/bin/mpirun";
  spec.as_root = true;
  REQUIRE(mpirun_command(spec) == Words{"/opt/ompi/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to",
                                        "none", "-np", "3", "-x", "MASTER_ADDR=localhost", "-x", "MASTER_PORT=29500",
                                        "./x", "a", "b"});
}

TEST_CASE("launch command: a local run pins devices only when asked", "[launcher]") {
  LaunchSpec spec = local_spec(0);
  spec.hosts = {{"localhost", {1, 3}}};
  spec.pin_devices = true;
  REQUIRE(mpirun_command(spec) == Words{"mpirun", "--bind-to", "none", "-np", "2", "-x", "MASTER_ADDR=localhost", "-x",
                                        "MASTER_PORT=29500", "-x", "CUDA_VISIBLE_DEVICES=1,3", "./x", "a", "b"});
}

TEST_CASE("launch command: one app context per host, exports and launcher args in each", "[launcher]") {
  LaunchSpec spec;
  spec.local = false;
  spec.pin_devices = true;
  spec.hosts = {{"worker-0", {0, 2}}, {"worker-1", {0, 1, 2}}};
  spec.environment = {{"NCCL_DEBUG", "INFO"}, {"MASTER_ADDR", "worker-0"}, {"MASTER_PORT", "6000"}};
  spec.launcher_args = {"--mca", "btl_tcp_if_include", "eth0"};
  spec.program = {"train", "--config", "ds.json"};
  // 5 ranks on 1 local core: no --oversubscribe, the hostfile's slots are the job's slots.
  REQUIRE(mpirun_command(spec) ==
          Words{"mpirun", "--bind-to", "none",
                "-np", "2", "--host", "worker-0:2", "-x", "NCCL_DEBUG=INFO", "-x", "MASTER_ADDR=worker-0", "-x",
                "MASTER_PORT=6000", "-x", "CUDA_VISIBLE_DEVICES=0,2", "--mca", "btl_tcp_if_include", "eth0",
                "train", "--config", "ds.json", ":",
                "-np", "3", "--host", "worker-1:3", "-x", "NCCL_DEBUG=INFO", "-x", "MASTER_ADDR=worker-0", "-x",
                "MASTER_PORT=6000", "-x", "CUDA_VISIBLE_DEVICES=0,1,2", "--mca", "btl_tcp_if_include", "eth0",
                "train", "--config", "ds.json"});
}

TEST_CASE("launch command: the pinned slots replace a CUDA_VISIBLE_DEVICES export", "[launcher]") {
  LaunchSpec spec = local_spec(0);
  spec.local = false;
  spec.pin_devices = true;
  spec.hosts = {{"w", {1}}};
  spec.environment = {{"CUDA_VISIBLE_DEVICES", "7"}};
  spec.program = {"p"};
  REQUIRE(mpirun_command(spec) ==
          Words{"mpirun", "--bind-to", "none", "-np", "1", "--host", "w:1", "-x", "CUDA_VISIBLE_DEVICES=1", "p"});
}

TEST_CASE("launch command: a binding in --launcher_args replaces --bind-to none", "[launcher]") {
  for (const Words& binding : {Words{"--bind-to", "core"}, Words{"--bind-to=socket"}, Words{"-bind-to", "numa"}}) {
    LaunchSpec spec = local_spec(1);
    spec.launcher_args = binding;
    Words expected = {"mpirun", "-np", "1", "-x", "MASTER_ADDR=localhost", "-x", "MASTER_PORT=29500"};
    expected.insert(expected.end(), binding.begin(), binding.end());
    expected.insert(expected.end(), {"./x", "a", "b"});
    REQUIRE(mpirun_command(spec) == expected);
  }
}

TEST_CASE("launch command: shell quoting for --dry-run", "[launcher]") {
  REQUIRE(shell_quote("plain-word_1.2/x:y,z=@%+") == "plain-word_1.2/x:y,z=@%+");
  REQUIRE(shell_quote("") == "''");
  REQUIRE(shell_quote("two words") == "'two words'");
  REQUIRE(shell_quote("it's") == "'it'\\''s'");
  REQUIRE(shell_quote("$HOME") == "'$HOME'");
  REQUIRE(shell_quote("a*b") == "'a*b'");
  REQUIRE(shell_quote("~") == "'~'");
  REQUIRE(shell_quote("tab\there") == "'tab\there'");
  REQUIRE(shell_command_line({"mpirun", "-x", "FATHOM_NOTE=hello world", "./x", "it's", ""}) ==
          "mpirun -x 'FATHOM_NOTE=hello world' ./x 'it'\\''s' ''");
}
