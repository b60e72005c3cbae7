#include "autograd/node.h"

#include <atomic>

#include "core/error.h"

namespace fathom::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

Node::Node(uint32_t num_outputs) : num_outputs_(num_outputs), sequence_nr_(g_next_sequence_nr++) {}

TensorList Node::apply_part(const TensorList&, const std::vector<bool>&) {
  FATHOM_FAIL("autograd: ", name(), " cannot compute part of its input gradients");
}

}  // namespace fathom::autograd
