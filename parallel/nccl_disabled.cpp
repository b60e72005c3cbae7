// The NCCL backend in a build without CUDA: absent, and saying so.
#include "core/error.h"
#include "parallel/nccl_communicator.h"

namespace fathom::parallel {

bool nccl_available() { return false; }
std::string nccl_unavailable_reason() { return "this build has no CUDA backend (configured with FATHOM_CUDA=OFF)"; }
std::string nccl_loaded_version() { return ""; }
std::string nccl_self_test(int) { return nccl_unavailable_reason(); }
std::shared_ptr<Communicator> make_nccl_communicator(Communicator&, int, const std::string&) {
  FATHOM_FAIL("NCCL backend: ", nccl_unavailable_reason());
}

}  // namespace fathom::parallel
