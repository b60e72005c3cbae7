// Every op of the registry that has a CUDA kernel, against its CPU twin: the entry's own samples
// (broadcast, non-contiguous, odd and empty sizes) in every dtype it lists, with fresh random
// inputs, outputs poisoned (each device allocation filled with NaN bytes) so an element a kernel
// forgets to write cannot pass. Then the same for the op's gradient (its backward kernels), with
// random output gradients. Elementwise |gpu - cpu| <= atol + rtol * |cpu|: rtol by dtype (f32 1e-5
// where the algorithm matches the CPU's; f16 1e-3; bf16 1e-2 — one rounding step of the format,
// since the GPU may round a different intermediate), atol from the op's own tolerance entry.
#include <string>

#include "core/cuda/cuda_runtime.h"
#include "core/generator.h"
#include "kernels/op_registry.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

namespace {

const Device kGpu = Device::cuda(0);

TensorList to_device(const TensorList& tensors, Device device) {
  TensorList out;
  for (const Tensor& t : tensors) out.push_back(t.defined() ? t.to(device) : t);
  return out;
}

double rtol_for(DType dtype) {
  switch (dtype) {
    case DType::F64: return 1e-12;
    case DType::F32: return 1e-5;
    case DType::F16: return 1e-3;
    case DType::BF16: return 1e-2;
    default: return 0;
  }
}

void require_same(const TensorList& gpu, const TensorList& cpu, double atol, const std::string& what) {
  REQUIRE(gpu.size() == cpu.size());
  for (size_t k = 0; k < cpu.size(); ++k) {
    INFO(what << ", output " << k);
    REQUIRE(gpu[k].defined() == cpu[k].defined());
    if (!cpu[k].defined()) continue;
    REQUIRE(gpu[k].device() == kGpu);
    REQUIRE(gpu[k].dtype() == cpu[k].dtype());
    FATHOM_REQUIRE_CLOSE(gpu[k].to(kCPU), cpu[k], atol, rtol_for(cpu[k].dtype()));
  }
}

// The gradient context of one sample, on `device`, with the given output gradients.
GradientContext gradient_context(const OpInfo& op, const OpSample& sample, const TensorList& inputs,
                                 const TensorList& outputs, const TensorList& grad_outputs) {
  GradientContext ctx;
  ctx.attrs = sample.attrs;
  for (size_t i = 0; i < sample.inputs.size(); ++i) {
    const Tensor& t = sample.inputs[i];
    ctx.input_sizes.push_back(t.sizes());
    ctx.input_dtypes.push_back(t.dtype());
    bool needed = is_floating_point(t.dtype());
    for (int skip : op.nondifferentiable_inputs) needed = needed && skip != static_cast<int>(i);
    ctx.needs_input_grad.push_back(needed);
  }
  if (op.gradient_uses_inputs) ctx.inputs = inputs;
  else ctx.inputs.resize(inputs.size());
  if (op.gradient_uses_outputs) ctx.outputs = outputs;
  else ctx.outputs.resize(outputs.size());
  ctx.grad_outputs = grad_outputs;
  return ctx;
}

}  // namespace

TEST_CASE("every CUDA op matches its CPU twin, forward and gradient, with poisoned outputs", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cuda::set_allocation_poison(true);
  Generator gen(20261130);
  int checked_ops = 0;
  for (const OpInfo& op : op_registry()) {
    if (!op.has_cuda) continue;
    ++checked_ops;
    for (DType dtype : op.dtypes) {
      for (const OpSample& sample : op.samples(dtype, gen)) {
        const std::string what = op.name + " " + dtype_name(dtype) + " " + sample.description;
        INFO(what);
        const TensorList expected = op.run(sample.inputs, sample.attrs);
        const TensorList device_inputs = to_device(sample.inputs, kGpu);
        const TensorList got = op.run(device_inputs, sample.attrs);
        const double atol = op.tolerance ? op.tolerance(dtype).atol : 0.0;
        require_same(got, expected, atol, what + " forward");
        if (!op.gradient || !is_floating_point(dtype)) continue;  // integer ops have no gradient

        TensorList grad_outputs;
        for (int k = 0; k < op.differentiable_outputs; ++k)
          grad_outputs.push_back(uniform(expected[k].sizes(), gen, -1, 1, DType::F64).to(expected[k].dtype()));
        const TensorList cpu_grads =
            op.gradient(gradient_context(op, sample, sample.inputs, expected, grad_outputs));
        const TensorList gpu_grads =
            op.gradient(gradient_context(op, sample, device_inputs, got, to_device(grad_outputs, kGpu)));
        require_same(gpu_grads, cpu_grads, atol, what + " gradient");
      }
    }
  }
  cuda::set_allocation_poison(false);
  CHECK(checked_ops > 0);
}
