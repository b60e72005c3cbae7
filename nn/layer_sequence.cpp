#include "nn/layer_sequence.h"

#include <algorithm>

#include "core/error.h"

namespace fathom::nn {

autograd::Variable LayerSequence::forward_layers(const autograd::Variable& input, size_t begin, size_t end) {
  end = std::min(end, num_layers());
  FATHOM_CHECK(begin <= end, "forward_layers: layers [", begin, ", ", end, ") of ", num_layers(), " are not a range");
  autograd::Variable x = input;
  for (size_t layer = begin; layer < end; ++layer) x = forward_layer(layer, x);
  return x;
}

}  // namespace fathom::nn
