#include <catch2/catch.hpp>

#include "launcher/launch_plan.h"
#include "test_util.h"

using namespace fathom::launcher;
using fathom::testing::error_of;
using Words = std::vector<std::string>;

namespace {

// The whole launcher short of reading files and starting mpirun.
Words command_for(const Words& args, const LaunchContext& context = {}) {
  return mpirun_command(plan_launch(parse_launcher_options(args), context));
}

}  // namespace

TEST_CASE("launch plan: local runs", "[launcher]") {
  REQUIRE(command_for({"./x", "a"}) == Words{"mpirun", "--bind-to", "none", "-np", "1", "-x", "MASTER_ADDR=localhost",
                                             "-x", "MASTER_PORT=29500", "./x", "a"});
  LaunchContext context;
  context.as_root = true;
  context.local_cores = 4;
  context.environment = {{"FATHOM_MPIRUN", "/opt/mpirun"}, {"OMP_PROC_BIND", "true"}, {"HOME", "/root"}};
  context.env_file = {{"NCCL_DEBUG", "WARN"}};
  REQUIRE(command_for({"--num_procs", "6", "--master_port", "1234", "./x"}, context) ==
          Words{"/opt/mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "6", "-x",
                "FATHOM_MPIRUN=/opt/mpirun", "-x", "OMP_PROC_BIND=true", "-x", "NCCL_DEBUG=WARN", "-x",
                "MASTER_ADDR=localhost", "-x", "MASTER_PORT=1234", "./x"});
}

TEST_CASE("launch plan: --include/--exclude without a hostfile pick local slots and pin them", "[launcher]") {
  LaunchContext four_cores;
  four_cores.local_cores = 4;
  REQUIRE(command_for({"--num_procs", "4", "-e", "localhost:0,2", "./x"}, four_cores) ==
          Words{"mpirun", "--bind-to", "none", "-np", "2", "-x", "MASTER_ADDR=localhost", "-x", "MASTER_PORT=29500",
                "-x", "CUDA_VISIBLE_DEVICES=1,3", "./x"});
  REQUIRE(error_of([] { command_for({"-i", "localhost:1", "./x"}); }) ==
          "--include: slot 1 of localhost is out of range (localhost has 1 slot: 0-0); without --hostfile the "
          "only host is localhost, with --num_procs slots (default 1)");
  REQUIRE(error_of([] { command_for({"-e", "worker-1", "./x"}); }) ==
          "--exclude: unknown host worker-1 (known hosts: localhost); without --hostfile the only host is "
          "localhost, with --num_procs slots (default 1)");
  REQUIRE(error_of([] { command_for({"--num_nodes", "2", "./x"}); }) ==
          "--num_nodes 2 needs --hostfile; without one, fathom runs on this machine only");
  REQUIRE(command_for({"--num_nodes", "1", "./x"}).size() == 10);
}

TEST_CASE("launch plan: a hostfile run", "[launcher]") {
  LaunchContext context;
  context.hosts = std::vector<Host>{{"worker-0", 4}, {"worker-1", 2}};
  REQUIRE(command_for({"--hostfile", "hosts", "--num_procs", "2", "--master_addr", "10.0.0.5", "train"}, context) ==
          Words{"mpirun", "--bind-to", "none",
                "-np", "2", "--host", "worker-0:2", "-x", "MASTER_ADDR=10.0.0.5", "-x", "MASTER_PORT=29500", "-x",
                "CUDA_VISIBLE_DEVICES=0,1", "train", ":",
                "-np", "2", "--host", "worker-1:2", "-x", "MASTER_ADDR=10.0.0.5", "-x", "MASTER_PORT=29500", "-x",
                "CUDA_VISIBLE_DEVICES=0,1", "train"});
  // The master address defaults to the first selected host.
  REQUIRE(command_for({"--hostfile", "hosts", "-i", "worker-1:1", "train"}, context) ==
          Words{"mpirun", "--bind-to", "none", "-np", "1", "--host", "worker-1:1", "-x", "MASTER_ADDR=worker-1", "-x",
                "MASTER_PORT=29500", "-x", "CUDA_VISIBLE_DEVICES=1", "train"});
}
