#include <catch2/catch.hpp>

#include "core/threads.h"
#include "core/error.h"

using namespace fathom;

TEST_CASE("default thread count follows the affinity rule", "[core]") {
  // mpirun -np 2 binds each rank to one of 2 cores: use the (narrower) mask as is.
  CHECK(default_num_threads(1, 2, 2) == 1);
  CHECK(default_num_threads(8, 64, 4) == 8);
  // Unbound: share the cores among the node's processes, at least one each.
  CHECK(default_num_threads(2, 2, 1) == 2);
  CHECK(default_num_threads(2, 2, 4) == 1);  // -np 4 --oversubscribe on 2 cores
  CHECK(default_num_threads(16, 16, 4) == 4);
  CHECK(default_num_threads(0, 2, 1) == 1);
}

TEST_CASE("set_num_threads overrides and validates", "[core]") {
  const int before = num_threads();
  CHECK(before >= 1);
  set_num_threads(3);
  CHECK(num_threads() == 3);
  CHECK_THROWS_WITH(set_num_threads(0), Catch::Contains("need at least 1 thread"));
  set_num_threads(before);
}
