#include "kernels/op_registry.h"

namespace fathom {

const std::vector<OpInfo>& op_registry() {
  static const std::vector<OpInfo> registry = [] {
    std::vector<OpInfo> ops;
    register_elementwise_ops(ops);
    register_reduction_ops(ops);
    register_optimizer_ops(ops);
    register_nn_ops(ops);
    register_matmul_ops(ops);
    register_position_ops(ops);
    register_shape_ops(ops);
    return ops;
  }();
  return registry;
}

const OpInfo& find_op(const std::string& name) {
  for (const OpInfo& op : op_registry())
    if (op.name == name) return op;
  FATHOM_FAIL("no op named \"", name, "\" in the registry");
}

OpCost per_output_element(const TensorList&, const TensorList& outputs, const Attributes&) {
  return {0, outputs.empty() ? 0 : outputs[0].numel()};
}

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::F64: return {1e-12, 1e-12};
    case DType::F32: return {1e-5, 1e-5};
    case DType::BF16: return {1e-2, 1e-2};
    case DType::F16: return {1e-3, 1e-3};
    default: return {0, 0};
  }
}

}  // namespace fathom
