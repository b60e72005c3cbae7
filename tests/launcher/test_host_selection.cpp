#include <catch2/catch.hpp>

#include "launcher/host_selection.h"
#include "test_util.h"

using namespace fathom::launcher;
using fathom::testing::error_of;

namespace {

const std::vector<Host> kHosts = {{"worker-0", 4}, {"worker-1", 4}, {"worker-2", 2}};

std::vector<HostSlots> select(const SelectionOptions& options) { return select_slots(kHosts, options); }

}  // namespace

TEST_CASE("host selection: every slot of every host by default", "[launcher]") {
  REQUIRE(select({}) == std::vector<HostSlots>{{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 1, 2, 3}},
                                               {"worker-2", {0, 1}}});
}

TEST_CASE("host selection: --include keeps what it names, in hostfile order", "[launcher]") {
  REQUIRE(select({.include = "worker-2@worker-0:3,1"}) ==
          std::vector<HostSlots>{{"worker-0", {1, 3}}, {"worker-2", {0, 1}}});
  // A host named twice gets the union.
  REQUIRE(select({.include = "worker-1:2@worker-1:0,2"}) == std::vector<HostSlots>{{"worker-1", {0, 2}}});
}

TEST_CASE("host selection: --exclude drops what it names", "[launcher]") {
  REQUIRE(select({.exclude = "worker-1@worker-0:0,2"}) ==
          std::vector<HostSlots>{{"worker-0", {1, 3}}, {"worker-2", {0, 1}}});
  REQUIRE(select({.exclude = "worker-2:0,1"}) ==
          std::vector<HostSlots>{{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 1, 2, 3}}});
}

TEST_CASE("host selection: --num_nodes and --num_procs take the first hosts and slots", "[launcher]") {
  REQUIRE(select({.num_nodes = 2}) == std::vector<HostSlots>{{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 1, 2, 3}}});
  REQUIRE(select({.num_procs = 2}) ==
          std::vector<HostSlots>{{"worker-0", {0, 1}}, {"worker-1", {0, 1}}, {"worker-2", {0, 1}}});
  REQUIRE(select({.num_nodes = 1, .num_procs = 3}) == std::vector<HostSlots>{{"worker-0", {0, 1, 2}}});
}

TEST_CASE("host selection: counts apply after the filter", "[launcher]") {
  REQUIRE(select({.exclude = "worker-0", .num_nodes = 1}) == std::vector<HostSlots>{{"worker-1", {0, 1, 2, 3}}});
  REQUIRE(select({.include = "worker-0:1,2,3@worker-1:0,3", .num_procs = 2}) ==
          std::vector<HostSlots>{{"worker-0", {1, 2}}, {"worker-1", {0, 3}}});
}

TEST_CASE("host selection: errors name the host, slot or count", "[launcher]") {
  REQUIRE(error_of([] { select({.include = "worker-0", .exclude = "worker-1"}); }) ==
          "--include and --exclude cannot be combined; use one of them");
  REQUIRE(error_of([] { select({.include = "worker-9:0"}); }) ==
          "--include: unknown host worker-9 (known hosts: worker-0, worker-1, worker-2)");
  REQUIRE(error_of([] { select({.exclude = "worker-3"}); }) ==
          "--exclude: unknown host worker-3 (known hosts: worker-0, worker-1, worker-2)");
  REQUIRE(error_of([] { select({.include = "worker-2:2"}); }) ==
          "--include: slot 2 of worker-2 is out of range (worker-2 has 2 slots: 0-1)");
  REQUIRE(error_of([] { select({.include = "worker-0:0,x"}); }) ==
          "--include \"worker-0:0,x\": slot \"x\" of worker-0 is not a slot index; write host:0,1");
  REQUIRE(error_of([] { select({.include = "worker-0:"}); }) ==
          "--include \"worker-0:\": slot \"\" of worker-0 is not a slot index; write host:0,1");
  REQUIRE(error_of([] { select({.include = "worker-0@@worker-1"}); }) ==
          "--include \"worker-0@@worker-1\": empty host name; write host1:0,1@host2");
  REQUIRE(error_of([] { select({.exclude = "worker-0@worker-1@worker-2"}); }) ==
          "--exclude \"worker-0@worker-1@worker-2\" leaves no slot to run on");
  REQUIRE(error_of([] { select({.num_nodes = 4}); }) == "--num_nodes 4: only 3 hosts available");
  REQUIRE(error_of([] { select({.exclude = "worker-1@worker-2", .num_nodes = 2}); }) ==
          "--num_nodes 2: only 1 host available after --include/--exclude");
  REQUIRE(error_of([] { select({.num_procs = 3}); }) == "--num_procs 3: host worker-2 has only 2 slots");
  REQUIRE(error_of([] { select({.include = "worker-0:1", .num_procs = 2}); }) ==
          "--num_procs 2: host worker-0 has only 1 slot after --include/--exclude");
}
