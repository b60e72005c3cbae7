#pragma once
// The op registry: one OpInfo per tensor op, in the spirit of PyTorch's OpInfo.
//
// An entry says how to run the op, how to compute it naively in f64 (the reference the CPU
// kernel is checked against), how to make sample inputs (broadcasting, non-contiguous and
// odd-sized cases), which bad inputs it must reject and with what message, and how to compute
// its input gradients. Tests enumerate the registry, so "every op is checked against its
// reference, rejects bad input, gives the same bits for any thread count and has a correct
// gradient" holds by construction: an entry missing a piece fails a test.
//
// Families register their ops in op_registry.cpp (an explicit list; no static-init tricks).

#include <functional>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "kernels/attributes.h"

namespace fathom {

using TensorList = std::vector<Tensor>;

struct OpSample {
  std::string description;  // e.g. "broadcast [3, 1] + [4]", shown when a check fails
  TensorList inputs;
  Attributes attrs;
};

struct OpErrorCase {
  std::string description;
  TensorList inputs;
  Attributes attrs;
  std::string expected_message;  // must appear in the error's message
};

// What a gradient definition sees. Inputs/outputs are defined only when the entry says the
// gradient uses them (autograd saves exactly those); sizes and dtypes are always there.
struct GradientContext {
  TensorList inputs;
  TensorList outputs;
  TensorList grad_outputs;  // one per output; undefined when that output got no gradient
  std::vector<Shape> input_sizes;
  std::vector<DType> input_dtypes;
  Attributes attrs;
  // Which inputs need a gradient; a definition may skip (return undefined for) the others.
  std::vector<bool> needs_input_grad;
};

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// What one call of an op computes, for the flops profiler (engine/monitor/flops_profiler.h): its
// multiply-accumulates and floating-point operations, from the shapes. DeepSpeed's profiler's
// conventions: a matmul is M·N·K MACs and 2·M·N·K flops (causal attention's T×T products count
// whole), a bias, softmax and activations 1 flop per element, layernorm 5, embedding and dropout 0;
// beyond them Fathom counts every other elementwise op 1 per output element and a reduction 1
// per input element (docs/monitoring.md lists them).
struct OpCost {
  int64_t macs = 0;
  int64_t flops = 0;
};
using OpCostFunction = std::function<OpCost(const TensorList& inputs, const TensorList& outputs, const Attributes& attrs)>;
// One flop per element of the first output: elementwise ops, softmax.
OpCost per_output_element(const TensorList& inputs, const TensorList& outputs, const Attributes& attrs);

struct OpInfo {
  std::string name;
  std::vector<DType> dtypes;  // dtypes samples are made in (and the op supports)
  // Runs the op on any device (the op's own checks and dispatch).
  std::function<TensorList(const TensorList& inputs, const Attributes& attrs)> run;
  // A naive CPU implementation in f64 (inputs arrive converted to f64); the oracle.
  std::function<TensorList(const TensorList& inputs, const Attributes& attrs)> reference;
  std::function<std::vector<OpSample>(DType dtype, Generator& gen)> samples;
  std::function<std::vector<OpErrorCase>()> error_cases;
  // Input gradients (undefined for inputs without one). Empty for non-differentiable ops.
  std::function<TensorList(const GradientContext& ctx)> gradient;
  bool gradient_uses_inputs = true;
  bool gradient_uses_outputs = false;
  // The first `differentiable_outputs` outputs carry gradients; any further outputs are values
  // saved for the gradient (e.g. layernorm's mean and rstd) and get no grad_output.
  int differentiable_outputs = 1;
  // Tolerance of the op against its f64 reference, by dtype.
  std::function<Tolerance(DType dtype)> tolerance;
  // Inputs that finite differences must not perturb (indices, masks), beyond non-float ones.
  std::vector<int> nondifferentiable_inputs;
  // Whether the op has a CUDA kernel (the CUDA tests compare it with the CPU twin).
  bool has_cuda = false;
  // Its arithmetic (see OpCost); every entry declares one.
  OpCostFunction cost;
};

const std::vector<OpInfo>& op_registry();
// Throws naming the op when it is not registered.
const OpInfo& find_op(const std::string& name);

// Registration functions of the op families (each in its family's source file).
void register_elementwise_ops(std::vector<OpInfo>& registry);
void register_reduction_ops(std::vector<OpInfo>& registry);
void register_optimizer_ops(std::vector<OpInfo>& registry);
void register_nn_ops(std::vector<OpInfo>& registry);
void register_matmul_ops(std::vector<OpInfo>& registry);
void register_position_ops(std::vector<OpInfo>& registry);
void register_shape_ops(std::vector<OpInfo>& registry);

// Default tolerances against an f64 reference: f64 1e-12, f32 1e-5, bf16/f16 per their epsilon.
Tolerance default_tolerance(DType dtype);

}  // namespace fathom
