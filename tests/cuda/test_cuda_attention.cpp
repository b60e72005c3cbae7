// causal_attention on CUDA against its CPU twin at GPT-2's head size and at odd ones (every head
// tier, T around the 16-row blocks and 32-row tiles, T = 1), forward (out, lse) and backward
// (dq, dk, dv, with and without a gradient into lse), outputs poisoned; results identical run to
// run; grouped-query heads, a cache's offset, sliding windows and padding masks (queries that
// see no key included); head sizes beyond the kernel's limit rejected by name.
#include <cmath>
#include <vector>

#include "core/generator.h"
#include "kernels/attention.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

namespace {

using TensorList = std::vector<Tensor>;
const Device kGpu = Device::cuda(0);

Tensor random(const Shape& shape, DType dtype, Generator& gen, double bound = 1.5) {
  return uniform(shape, gen, -bound, bound, DType::F64).to(dtype);
}

struct Bound {
  double atol, rtol;
};
// Softmax-weighted sums over up to T keys, grouped differently from the CPU (32-key tiles, warp
// trees): f32 within a few ulp of the values' scale; 16-bit one rounding step apart.
Bound bound(DType dtype) {
  switch (dtype) {
    case DType::F64: return {1e-10, 1e-10};
    case DType::F32: return {2e-5, 1e-4};
    case DType::F16: return {4e-3, 4e-3};
    default: return {3e-2, 2e-2};
  }
}

struct PoisonGuard {
  PoisonGuard() { cuda::set_allocation_poison(true); }
  ~PoisonGuard() { cuda::set_allocation_poison(false); }
};

TensorList to_gpu(const TensorList& tensors) {
  TensorList out;
  for (const Tensor& t : tensors) out.push_back(t.defined() ? t.to(kGpu) : t);
  return out;
}

}  // namespace

TEST_CASE("CUDA causal attention matches the CPU, forward and backward, every dtype and head tier", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  PoisonGuard poison;
  Generator gen(31);
  // Emulated, one batch and head fewer: the kernels' cost grows with B x H x T^2.
  const Shape shapes[] = {
      // GPT-2's head size; T not a multiple of 16 or 32.
      testing::gpu_or_emulated(Shape{2, 3, 100, 64}, Shape{1, 2, 100, 64}),
      testing::gpu_or_emulated(Shape{1, 2, 257, 128}, Shape{1, 1, 257, 128}),
      {1, 2, 33, 48},   // 48 runs in the 64 tier, zero-padded
      {3, 1, 16, 5},
      {1, 1, 1, 32},
      {2, 2, 70, 1},
  };
  for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    for (const Shape& shape : shapes) {
      for (bool with_dlse : {false, true}) {
        INFO(dtype_name(dtype) << " " << shape_str(shape) << (with_dlse ? " with dlse" : ""));
        const Tensor q = random(shape, dtype, gen), k = random(shape, dtype, gen), v = random(shape, dtype, gen);
        const AttentionOutputs cpu = causal_attention(q, k, v);
        const TensorList g = to_gpu({q, k, v});
        const AttentionOutputs gpu = causal_attention(g[0], g[1], g[2]);
        const Bound tol = bound(dtype);
        FATHOM_REQUIRE_CLOSE(gpu.out.to(kCPU), cpu.out, tol.atol, tol.rtol);
        FATHOM_REQUIRE_CLOSE(gpu.lse.to(kCPU), cpu.lse, tol.atol, tol.rtol);

        const Tensor dout = random(shape, dtype, gen, 1.0);
        const Tensor dlse = with_dlse ? random(cpu.lse.sizes(), cpu.lse.dtype(), gen, 1.0) : Tensor();
        // Both backwards from the CPU's forward results, so only the backward kernels differ.
        const AttentionGrads want = causal_attention_backward(dout, q, k, v, cpu.out, cpu.lse, {}, dlse);
        const TensorList dev = to_gpu({dout, cpu.out, cpu.lse, dlse});
        const AttentionGrads got =
            causal_attention_backward(dev[0], g[0], g[1], g[2], dev[1], dev[2], {}, dev[3]);
        FATHOM_REQUIRE_CLOSE(got.dq.to(kCPU), want.dq, tol.atol, tol.rtol);
        FATHOM_REQUIRE_CLOSE(got.dk.to(kCPU), want.dk, tol.atol, tol.rtol);
        FATHOM_REQUIRE_CLOSE(got.dv.to(kCPU), want.dv, tol.atol, tol.rtol);
      }
    }
  }
}

TEST_CASE("CUDA causal attention: grouped-query heads, a cache, sliding windows and padding like the CPU", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(32);
  struct Case {
    const char* name;
    Shape q, kv;
    int64_t window;
    bool left_padding;
  };
  const Case cases[] = {
      {"GQA 4:2", {1, 4, 50, 64}, {1, 2, 50, 64}, 0, false},
      {"MQA 3:1 with a cache of 40", {2, 3, 9, 32}, {2, 1, 49, 32}, 0, false},
      {"one query after 99 keys", {1, 2, 1, 64}, {1, 2, 100, 64}, 0, false},
      {"window 20 over 70 positions, GQA", {1, 4, 70, 16}, {1, 2, 70, 16}, 20, false},
      {"left padding, window 7", {2, 2, 40, 8}, {2, 1, 40, 8}, 7, true},
  };
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const Case& c : cases) {
      INFO(dtype_name(dtype) << " " << c.name);
      const Tensor q = random(c.q, dtype, gen), k = random(c.kv, dtype, gen), v = random(c.kv, dtype, gen);
      AttentionOptions options;
      options.window = c.window;
      if (c.left_padding) {  // batch row 1 starts with 11 padding tokens
        std::vector<int64_t> keep(2 * c.kv[2], 1);
        for (int64_t j = 0; j < 11; ++j) keep[c.kv[2] + j] = 0;
        options.key_padding_mask = Tensor::from_vector(keep, {2 * c.kv[2]}).reshape({2, c.kv[2]});
      }
      const AttentionOutputs cpu = causal_attention(q, k, v, options);
      AttentionOptions on_gpu = options;
      if (options.key_padding_mask.defined()) on_gpu.key_padding_mask = options.key_padding_mask.to(kGpu);
      const TensorList g = to_gpu({q, k, v});
      const AttentionOutputs gpu = causal_attention(g[0], g[1], g[2], on_gpu);
      const Bound tol = bound(dtype);
      FATHOM_REQUIRE_CLOSE(gpu.out.to(kCPU), cpu.out, tol.atol, tol.rtol);
      FATHOM_REQUIRE_CLOSE(gpu.lse.to(kCPU), cpu.lse, tol.atol, tol.rtol);  // -inf rows included

      const Tensor dout = random(c.q, dtype, gen, 1.0);
      const AttentionGrads want = causal_attention_backward(dout, q, k, v, cpu.out, cpu.lse, options);
      const TensorList dev = to_gpu({dout, cpu.out, cpu.lse});
      const AttentionGrads got = causal_attention_backward(dev[0], g[0], g[1], g[2], dev[1], dev[2], on_gpu);
      FATHOM_REQUIRE_CLOSE(got.dq.to(kCPU), want.dq, tol.atol, tol.rtol);
      FATHOM_REQUIRE_CLOSE(got.dk.to(kCPU), want.dk, tol.atol, tol.rtol);
      FATHOM_REQUIRE_CLOSE(got.dv.to(kCPU), want.dv, tol.atol, tol.rtol);
    }
  }
}

TEST_CASE("CUDA causal attention at GPT-2 size, a custom scale, and only some gradients", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(5);
  // Emulated: one head of half GPT-2's context (the emulator runs each head alike, slowly).
  const Shape shape = testing::gpu_or_emulated(Shape{1, 12, 1024, 64}, Shape{1, 1, 512, 64});
  const DType dtype = DType::BF16;
  const Tensor q = random(shape, dtype, gen), k = random(shape, dtype, gen), v = random(shape, dtype, gen);
  const AttentionOptions scale{.scale = 0.3};
  const AttentionOutputs cpu = causal_attention(q, k, v, scale);
  const TensorList g = to_gpu({q, k, v});
  const AttentionOutputs gpu = causal_attention(g[0], g[1], g[2], scale);
  FATHOM_REQUIRE_CLOSE(gpu.out.to(kCPU), cpu.out, bound(dtype).atol, bound(dtype).rtol);
  FATHOM_REQUIRE_CLOSE(gpu.lse.to(kCPU), cpu.lse, 1e-4, 1e-5);  // lse is f32

  const Tensor dout = random(shape, dtype, gen, 1.0);
  const AttentionGrads want = causal_attention_backward(dout, q, k, v, cpu.out, cpu.lse, scale);
  const Tensor dout_gpu = dout.to(kGpu), out_gpu = cpu.out.to(kGpu), lse_gpu = cpu.lse.to(kGpu);
  const AttentionGrads only_dq = causal_attention_backward(dout_gpu, g[0], g[1], g[2], out_gpu, lse_gpu, scale, {},
                                                           true, false, false);
  CHECK_FALSE(only_dq.dk.defined());
  FATHOM_REQUIRE_CLOSE(only_dq.dq.to(kCPU), want.dq, bound(dtype).atol, bound(dtype).rtol);
  const AttentionGrads only_dv = causal_attention_backward(dout_gpu, g[0], g[1], g[2], out_gpu, lse_gpu, scale, {},
                                                           false, false, true);
  FATHOM_REQUIRE_CLOSE(only_dv.dv.to(kCPU), want.dv, bound(dtype).atol, bound(dtype).rtol);
  const AttentionGrads only_dk = causal_attention_backward(dout_gpu, g[0], g[1], g[2], out_gpu, lse_gpu, scale, {},
                                                           false, true, false);
  FATHOM_REQUIRE_CLOSE(only_dk.dk.to(kCPU), want.dk, bound(dtype).atol, bound(dtype).rtol);
}

TEST_CASE("CUDA causal attention gives the same bits on every run", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(8);
  const Shape shape = testing::gpu_or_emulated(Shape{2, 4, 300, 64}, Shape{1, 1, 300, 64});  // fewer heads emulated
  const TensorList g = to_gpu({random(shape, DType::F32, gen), random(shape, DType::F32, gen),
                               random(shape, DType::F32, gen)});
  const Tensor dout = random(shape, DType::F32, gen, 1.0).to(kGpu);
  const AttentionOutputs first = causal_attention(g[0], g[1], g[2]);
  const AttentionGrads first_grads = causal_attention_backward(dout, g[0], g[1], g[2], first.out, first.lse);
  for (int run = 0; run < 2; ++run) {
    const AttentionOutputs again = causal_attention(g[0], g[1], g[2]);
    const AttentionGrads grads = causal_attention_backward(dout, g[0], g[1], g[2], again.out, again.lse);
    FATHOM_REQUIRE_CLOSE(again.out.to(kCPU), first.out.to(kCPU), 0.0, 0.0);
    FATHOM_REQUIRE_CLOSE(again.lse.to(kCPU), first.lse.to(kCPU), 0.0, 0.0);
    FATHOM_REQUIRE_CLOSE(grads.dq.to(kCPU), first_grads.dq.to(kCPU), 0.0, 0.0);
    FATHOM_REQUIRE_CLOSE(grads.dk.to(kCPU), first_grads.dk.to(kCPU), 0.0, 0.0);
    FATHOM_REQUIRE_CLOSE(grads.dv.to(kCPU), first_grads.dv.to(kCPU), 0.0, 0.0);
  }
}

TEST_CASE("CUDA causal attention rejects head sizes above 128 by name", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const Tensor q = Tensor::zeros({1, 1, 4, 129}, DType::F32, kGpu);
  CHECK_THROWS_WITH(causal_attention(q, q, q),
                    Catch::Contains("causal_attention: head size 129 is above the CUDA kernel's limit of 128"));
}
