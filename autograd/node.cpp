#include "autograd/node.h"

#include <atomic>

namespace fathom::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

Node::Node(uint32_t num_outputs) : num_outputs_(num_outputs), sequence_nr_(g_next_sequence_nr++) {}

}  // namespace fathom::autograd
