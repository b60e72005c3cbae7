// A deliberately failing job for the failure tests (CTest checks its output):
//   throw     rank 1 throws while rank 0 waits in a collective: the job must end at once
//   mismatch  under FATHOM_COMM_DEBUG=1, rank 0 all-reduces while rank 1 broadcasts
//   hang      rank 1 never joins rank 0's all-reduce: FATHOM_COMM_TIMEOUT must end the job
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "parallel/runtime.h"

using namespace fathom;

int main(int argc, char** argv) {
  distributed::Runtime runtime(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  distributed::Communicator& world = runtime.world();
  Tensor values = Tensor::ones({1024});
  if (mode == "throw") {
    if (world.rank() == 1) FATHOM_FAIL("matmul: shapes [4, 64] and [32, 10] do not match (64 != 32)");
    world.all_reduce(values);  // rank 1 never comes
  } else if (mode == "mismatch") {
    if (world.rank() == 0) world.all_reduce(values);
    else world.broadcast(values, 0);
  } else if (mode == "hang") {
    if (world.rank() == 0) world.all_reduce(values);
    else std::this_thread::sleep_for(std::chrono::seconds(600));
  }
  return 0;
}
