// Dropout on the GPU draws the CPU's Philox words, so its mask — and, with one product and one
// rounding per element, its output — equals the CPU's bit for bit, for every dtype, shard
// layout and p. The multi-tensor optimizer steps update a whole list in one launch and agree
// with the CPU (and bit for bit with the single-tensor CUDA step).
#include <cstring>

#include "core/generator.h"
#include "core/cuda/cuda_runtime.h"
#include "kernels/dropout.h"
#include "kernels/reduction.h"
#include "kernels/reduction_kernels.h"
#include "nn/adam.h"
#include "nn/sgd.h"
#include "tests/kernels/step_lists.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::testing;

namespace {

const Device kGpu = Device::cuda(0);

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(kCPU).contiguous(), y = b.to(kCPU).contiguous();
  return x.nbytes() == 0 || std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;  // empty: no data pointer
}

struct DropoutCase {
  Shape shape;
  double p;
  int64_t column_offset, full_width;  // full_width -1: unsharded
};

}  // namespace

TEST_CASE("CUDA dropout: the CPU's mask and outputs bit for bit, forward and accumulating backward", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cuda::set_allocation_poison(true);
  Generator gen(2024);
  const DropoutCase cases[] = {
      {{64, 700}, 0.1, 0, -1},       {{3, 1}, 0.5, 0, -1},        {{5, 4097}, 0.5, 13, 5000},
      {{2, 9, 1031}, 0.9, 0, -1},    {{7, 6}, 0.0, 2, 11},        {{4, 5}, 1.0, 0, -1},
      {{1000, 3}, 0.3, 1, 4},        {{2048, 769}, 0.2, 0, -1}};
  for (DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (const DropoutCase& c : cases) {
      INFO(dtype_name(dtype) << " " << shape_str(c.shape) << ", p " << c.p << ", columns from " << c.column_offset
                             << " of " << c.full_width);
      const Tensor x = uniform(c.shape, gen, -2, 2, DType::F64).to(dtype);
      const int64_t rows = x.numel() / c.shape.back();
      const Tensor sample = randint({rows}, gen, 0, int64_t{1} << 30, DType::I64);
      const uint64_t seed = 0x5eed0000ull + static_cast<uint64_t>(rows), offset = 7;
      const Tensor expected = dropout(x, c.p, seed, offset, sample, c.column_offset, c.full_width);
      const Tensor got = dropout(x.to(kGpu), c.p, seed, offset, sample.to(kGpu), c.column_offset, c.full_width);
      REQUIRE(got.device() == kGpu);
      CHECK(same_bits(got, expected));
      // The mask itself: kept exactly where the CPU kept (x is never 0 here).
      const std::vector<double> g = got.to_vector<double>(), e = expected.to_vector<double>();
      int64_t mask_mismatches = 0;
      for (size_t i = 0; i < g.size(); ++i) mask_mismatches += (g[i] == 0.0) != (e[i] == 0.0);
      CHECK(mask_mismatches == 0);

      // Backward into an existing gradient, as a gradient bucket would receive it.
      const Tensor dy = uniform(c.shape, gen, -1, 1, DType::F64).to(dtype);
      const Tensor dx_cpu = uniform(c.shape, gen, -1, 1, DType::F64).to(dtype);
      const Tensor dx_gpu = dx_cpu.to(kGpu);
      dropout_backward_into(dx_cpu, dy, c.p, seed, offset, sample, c.column_offset, c.full_width, true);
      dropout_backward_into(dx_gpu, dy.to(kGpu), c.p, seed, offset, sample.to(kGpu), c.column_offset, c.full_width,
                            true);
      CHECK(same_bits(dx_gpu, dx_cpu));
    }
  }
  cuda::set_allocation_poison(false);
}

TEST_CASE("CUDA multi-tensor Adam: one launch for the list, equal to the CPU and to per-tensor steps", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  for (bool adam_w : {true, false}) {
    INFO((adam_w ? "adamw" : "adam + L2"));
    Generator gen(31);
    const std::vector<AdamTensors> cpu = adam_list(gen);
    const std::vector<AdamTensors> gpu_multi = copy_list(cpu, kGpu);
    const std::vector<AdamTensors> gpu_single = copy_list(cpu, kGpu);
    for (int64_t step : {1, 2, 3}) {
      const AdamHyper h = adam_hyper_for_test(adam_w, step);
      adam_step_multi(cpu, h);
      adam_step_multi(gpu_multi, h);
      for (const AdamTensors& t : gpu_single) adam_step(t.params, t.grads, t.exp_avg, t.exp_avg_sq, h, t.param_copy);
    }
    for (size_t k = 0; k < cpu.size(); ++k) {
      INFO("tensor " << k << " of " << cpu[k].params.numel() << " elements at offset " << cpu[k].params.offset());
      // FMA placement may differ between the compilers: an ulp or so.
      FATHOM_REQUIRE_CLOSE(gpu_multi[k].params, cpu[k].params, 1e-6, 1e-5);
      FATHOM_REQUIRE_CLOSE(gpu_multi[k].exp_avg, cpu[k].exp_avg, 1e-7, 1e-5);
      FATHOM_REQUIRE_CLOSE(gpu_multi[k].exp_avg_sq, cpu[k].exp_avg_sq, 1e-9, 1e-5);
      CHECK(same_bits(gpu_multi[k].params, gpu_single[k].params));
      CHECK(same_bits(gpu_multi[k].exp_avg, gpu_single[k].exp_avg));
      CHECK(same_bits(gpu_multi[k].exp_avg_sq, gpu_single[k].exp_avg_sq));
      CHECK(same_bits(gpu_multi[k].param_copy, gpu_single[k].param_copy));
      if (cpu[k].param_copy.defined())  // every element written: the new params rounded once
        CHECK(same_bits(gpu_multi[k].param_copy, gpu_multi[k].params.to(kCPU).to(cpu[k].param_copy.dtype())));
    }
  }
}

TEST_CASE("CUDA multi-tensor SGD: equal to the CPU and to per-tensor steps", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  struct Mode {
    double momentum;
    bool nesterov;
  };
  for (const Mode mode : {Mode{0.0, false}, Mode{0.9, false}, Mode{0.9, true}}) {
    INFO("momentum " << mode.momentum << (mode.nesterov ? ", nesterov" : ""));
    Generator gen(32);
    const std::vector<SgdTensors> cpu = sgd_list(gen);
    const std::vector<SgdTensors> gpu_multi = copy_list(cpu, kGpu);
    const std::vector<SgdTensors> gpu_single = copy_list(cpu, kGpu);
    for (bool first : {true, false, false}) {
      const SgdHyper h = sgd_hyper_for_test(mode.momentum, mode.nesterov, first);
      sgd_step_multi(cpu, h);
      sgd_step_multi(gpu_multi, h);
      for (const SgdTensors& t : gpu_single) sgd_step(t.params, t.grads, t.momentum_buffer, h, t.param_copy);
    }
    for (size_t k = 0; k < cpu.size(); ++k) {
      INFO("tensor " << k << " of " << cpu[k].params.numel() << " elements at offset " << cpu[k].params.offset());
      FATHOM_REQUIRE_CLOSE(gpu_multi[k].params, cpu[k].params, 1e-6, 1e-5);
      FATHOM_REQUIRE_CLOSE(gpu_multi[k].momentum_buffer, cpu[k].momentum_buffer, 1e-6, 1e-5);
      CHECK(same_bits(gpu_multi[k].params, gpu_single[k].params));
      CHECK(same_bits(gpu_multi[k].momentum_buffer, gpu_single[k].momentum_buffer));
      CHECK(same_bits(gpu_multi[k].param_copy, gpu_single[k].param_copy));
      if (cpu[k].param_copy.defined())
        CHECK(same_bits(gpu_multi[k].param_copy, gpu_multi[k].params.to(kCPU).to(cpu[k].param_copy.dtype())));
    }
  }
}

TEST_CASE("CUDA scale_multi: one launch for the list, bit for bit the CPU's products and copies", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(33);
  const std::vector<ScaleTensors> cpu = scale_list(gen);
  const std::vector<ScaleTensors> gpu = copy_list(cpu, kGpu);
  for (double factor : {0.7310585786300049, 1.0 / 65536, 1.0}) {
    scale_multi(cpu, factor);
    const int64_t launches = cuda::kernel_launches();
    scale_multi(gpu, factor);
    CHECK(cuda::kernel_launches() - launches == 1);
  }
  for (size_t k = 0; k < cpu.size(); ++k) {
    INFO("tensor " << k << " of " << cpu[k].values.numel() << " elements at offset " << cpu[k].values.offset());
    CHECK(same_bits(gpu[k].values, cpu[k].values));  // one f32 multiply: no FMA to differ on
    CHECK(same_bits(gpu[k].copy, cpu[k].copy));
  }
}

TEST_CASE("CUDA: nn::Adam and nn::Sgd step a whole group of device parameters with one kernel launch", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(34);
  std::vector<autograd::Variable> params;
  for (int64_t n : {1, 768, 4099, 3 * 768 * 768, 50257})
    params.emplace_back(uniform({n}, gen, -1, 1).to(kGpu), true, "p" + std::to_string(n));
  auto set_grads = [&] {
    for (const auto& p : params) p.set_grad(uniform({p.numel()}, gen, -1, 1).to(kGpu));
  };
  nn::AdamW adam(params, {.lr = 1e-3, .weight_decay = 0.1});
  nn::Sgd sgd(params, {.lr = 1e-2, .momentum = 0.9});
  // The first step creates the state buffers (fill kernels); the second is the steady state.
  for (int step = 0; step < 2; ++step) {
    set_grads();
    int64_t launches = cuda::kernel_launches();
    adam.step();
    if (step == 1) CHECK(cuda::kernel_launches() - launches == 1);
    launches = cuda::kernel_launches();
    sgd.step();
    if (step == 1) CHECK(cuda::kernel_launches() - launches == 1);
  }
}

TEST_CASE("CUDA global_norm: a list of contiguous f32 tensors in two launches, equal to the CPU", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(35);
  std::vector<Tensor> cpu;
  for (int64_t n : {int64_t{1}, int64_t{4099}, kernels::kSquaresChunk, 3 * kernels::kSquaresChunk + 17, int64_t{0}})
    cpu.push_back(uniform({n}, gen, -2, 2));
  cpu.push_back(uniform({300, 7}, gen, -1, 1).transpose(0, 1));  // strided: its own reduction
  cpu.push_back(uniform({513}, gen, -1, 1).to(DType::BF16));     // not f32: its own reduction
  std::vector<Tensor> gpu;
  for (const Tensor& t : cpu) gpu.push_back(t.to(kGpu));
  CHECK(global_norm(gpu) == Approx(global_norm(cpu)).epsilon(1e-12));

  const std::vector<Tensor> f32_only(gpu.begin(), gpu.begin() + 5);
  const int64_t launches = cuda::kernel_launches();
  const double norm = global_norm(f32_only);
  CHECK(cuda::kernel_launches() - launches == 2);
  CHECK(norm == Approx(global_norm(std::vector<Tensor>(cpu.begin(), cpu.begin() + 5))).epsilon(1e-12));
}
