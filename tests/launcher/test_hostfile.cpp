#include <catch2/catch.hpp>

#include "launcher/hostfile.h"
#include "test_util.h"

using fathom::launcher::Host;
using fathom::launcher::parse_hostfile;
using fathom::launcher::read_hostfile;
using fathom::testing::error_of;

TEST_CASE("hostfile: hosts in file order, comments and blank lines skipped", "[launcher]") {
  const char* text =
      "# the cluster\n"
      "\n"
      "worker-0 slots=8\n"
      "   worker-1\tslots=4   # trailing comment\n"
      "  # indented comment\n"
      "worker-2 slots=1";  // no final newline
  REQUIRE(parse_hostfile(text, "hosts") == std::vector<Host>{{"worker-0", 8}, {"worker-1", 4}, {"worker-2", 1}});
}

TEST_CASE("hostfile: Windows line endings are accepted", "[launcher]") {
  REQUIRE(parse_hostfile("a slots=2\r\nb slots=3\r\n", "hosts") == std::vector<Host>{{"a", 2}, {"b", 3}});
}

TEST_CASE("hostfile: bad slots name the file, line and content", "[launcher]") {
  const char* text = "worker-0 slots=2\n\nworker-1 slots=four\n";
  REQUIRE(error_of([&] { parse_hostfile(text, "hosts"); }) ==
          "hostfile hosts:3: \"worker-1 slots=four\": slots must be a positive integer");
  for (const char* slots : {"0", "-1", "+2", "2.5", "", "99999999999"})
    REQUIRE(error_of([&] { parse_hostfile(std::string("w slots=") + slots, "h"); }) ==
            std::string("hostfile h:1: \"w slots=") + slots + "\": slots must be a positive integer");
}

TEST_CASE("hostfile: a line that is not \"host slots=N\"", "[launcher]") {
  const std::string expected = "\": expected \"hostname slots=N\", e.g. \"worker-1 slots=8\"";
  for (const char* line : {"worker-1", "worker-1 4", "worker-1 slots = 4", "worker-1 slots=4 extra", "slots=4"})
    REQUIRE(error_of([&] { parse_hostfile(std::string("a slots=1\n") + line + " # why", "hosts"); }) ==
            std::string("hostfile hosts:2: \"") + line + expected);
}

TEST_CASE("hostfile: host names cannot hold the filter separators", "[launcher]") {
  REQUIRE(error_of([] { parse_hostfile("w:1 slots=2", "hosts"); }) ==
          "hostfile hosts:1: \"w:1 slots=2\": a host name cannot contain ':', '@' or ',' (they separate hosts "
          "and slots in --include/--exclude)");
}

TEST_CASE("hostfile: a duplicate host names both lines", "[launcher]") {
  REQUIRE(error_of([] { parse_hostfile("a slots=1\nb slots=2\na slots=4\n", "cluster.txt"); }) ==
          "hostfile cluster.txt:3: \"a slots=4\": host a is already listed on line 1; list each host once");
}

TEST_CASE("hostfile: no hosts", "[launcher]") {
  const std::string expected = "hostfile hosts: no hosts; add one line per host: \"hostname slots=N\"";
  REQUIRE(error_of([] { parse_hostfile("", "hosts"); }) == expected);
  REQUIRE(error_of([] { parse_hostfile("# only a comment\n\n   \n", "hosts"); }) == expected);
}

TEST_CASE("hostfile: an unreadable file", "[launcher]") {
  REQUIRE(error_of([] { read_hostfile("/nonexistent/hosts"); }) ==
          "hostfile /nonexistent/hosts: cannot read it (No such file or directory)");
  REQUIRE(error_of([] { read_hostfile("/tmp"); }) == "hostfile /tmp: cannot read it (it is a directory)");
}
