#include "nn/containers.h"

namespace fathom::nn {

Variable Sequential::forward(const Variable& x) {
  Variable h = x;
  for (Module& module : *this) h = module(h);
  return h;
}

VariableList Sequential::forward(const VariableList& inputs) {
  VariableList h = inputs;
  for (Module& module : *this) h = module(h);
  return h;
}

}  // namespace fathom::nn
