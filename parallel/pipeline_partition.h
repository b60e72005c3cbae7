#pragma once
// How a list of layers is cut into pipeline stages: DeepSpeed's PipelineModule partition_method.
//
//   "parameters"  balanced by each layer's trainable parameter count;
//   "uniform"     equal layer counts, the first stages taking the remainder;
//   "type:REGEX"  balanced by the count of layers whose type name matches REGEX (searched,
//                 case-insensitive, as DeepSpeed does), e.g. "type:TransformerBlock".
//
// Balanced means DeepSpeed's partition_balanced: the smallest possible heaviest stage, then the
// stages filled front to back up to it. Unlike DeepSpeed, no stage is left without a layer:
// a stage that would be empty takes one from the stage before it. Pure arithmetic.
//
//   std::vector<size_t> b = partition_layers("parameters", weights_of_layers, 4);
//   // stage s runs layers [b[s], b[s + 1])

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/layer_sequence.h"

namespace fathom::parallel {

using nn::LayerDescription;  // nn/layer_sequence.h

// parts + 1 boundaries from 0 to the number of layers. Errors name the method and the fix:
// more parts than layers, an unknown method, a bad regex.
std::vector<size_t> partition_layers(const std::string& method, const std::vector<LayerDescription>& layers,
                                     int parts);
// The two building blocks, exposed for tests.
std::vector<size_t> partition_uniform(size_t items, int parts);
std::vector<size_t> partition_balanced(const std::vector<int64_t>& weights, int parts);

}  // namespace fathom::parallel
