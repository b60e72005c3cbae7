#include "parallel/pipeline_partition.h"

#include <algorithm>
#include <numeric>
#include <regex>

#include "core/error.h"

namespace fathom::parallel {

std::vector<size_t> partition_uniform(size_t items, int parts) {
  FATHOM_CHECK(parts >= 1, "partition: parts must be >= 1, got ", parts);
  std::vector<size_t> bounds(parts + 1, 0);
  const size_t base = items / parts, extra = items % parts;
  for (int p = 0; p < parts; ++p) bounds[p + 1] = bounds[p] + base + (static_cast<size_t>(p) < extra ? 1 : 0);
  return bounds;
}

namespace {

// Fills the parts front to back, each as far as `limit` allows while leaving at least one item
// for every part after it; empty when the items do not fit.
std::vector<size_t> pack(const std::vector<int64_t>& weights, int parts, int64_t limit) {
  const size_t n = weights.size();
  std::vector<size_t> bounds{0};
  size_t next = 0;
  for (int p = 0; p < parts; ++p) {
    const size_t reserved = static_cast<size_t>(parts - p - 1);  // one item for each part after this
    int64_t sum = 0;
    size_t end = next;
    while (end < n && n - end > reserved && sum + weights[end] <= limit) sum += weights[end++];
    if (end == next && n - end > reserved) return {};  // one item alone is above the limit
    bounds.push_back(end);
    next = end;
  }
  if (next != n) return {};
  return bounds;
}

}  // namespace

std::vector<size_t> partition_balanced(const std::vector<int64_t>& weights, int parts) {
  FATHOM_CHECK(parts >= 1, "partition: parts must be >= 1, got ", parts);
  FATHOM_CHECK(weights.size() >= static_cast<size_t>(parts), "partition: ", parts, " stages for ", weights.size(),
               " layers; use at most ", weights.size(), " stages");
  for (int64_t w : weights) FATHOM_CHECK(w >= 0, "partition: negative layer weight ", w);
  // The smallest heaviest part is between the heaviest item and the total: bisect on it.
  int64_t low = *std::max_element(weights.begin(), weights.end());
  int64_t high = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (pack(weights, parts, mid).empty()) low = mid + 1;
    else high = mid;
  }
  std::vector<size_t> bounds = pack(weights, parts, low);
  FATHOM_CHECK(!bounds.empty(), "partition: no packing found (internal error)");
  return bounds;
}

std::vector<size_t> partition_layers(const std::string& method, const std::vector<LayerDescription>& layers,
                                     int parts) {
  FATHOM_CHECK(parts >= 1, "pipeline partition: stages must be >= 1, got ", parts);
  FATHOM_CHECK(layers.size() >= static_cast<size_t>(parts), "pipeline partition: ", parts, " stages but the model has ",
               layers.size(), " layers; use at most ", layers.size(), " stages (each stage needs a layer)");
  if (method == "uniform") return partition_uniform(layers.size(), parts);
  std::vector<int64_t> weights;
  if (method == "parameters") {
    for (const LayerDescription& layer : layers) weights.push_back(layer.parameters);
  } else if (method.rfind("type:", 0) == 0) {
    const std::string pattern = method.substr(5);
    std::regex regex;
    try {
      regex = std::regex(pattern, std::regex::icase);
    } catch (const std::regex_error& e) {
      FATHOM_FAIL("pipeline partition \"", method, "\": \"", pattern, "\" is not a valid regular expression (",
                  e.what(), ")");
    }
    for (const LayerDescription& layer : layers) weights.push_back(std::regex_search(layer.type, regex) ? 1 : 0);
    FATHOM_CHECK(std::accumulate(weights.begin(), weights.end(), int64_t{0}) > 0, "pipeline partition \"", method,
                 "\": no layer's type matches \"", pattern, "\"; the model's layer types are listed by "
                 "PipelineModule::describe()");
  } else {
    FATHOM_FAIL("unknown pipeline partition method \"", method,
                "\"; use \"parameters\", \"uniform\" or \"type:REGEX\" (e.g. \"type:TransformerBlock\")");
  }
  return partition_balanced(weights, parts);
}

}  // namespace fathom::parallel
