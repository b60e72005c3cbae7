// matmul, linear and linear_gelu on CUDA (cuBLASLt) against the CPU GEMM, at the sizes a GPT-2
// step uses and at awkward ones (batched, broadcast, transposed, misaligned views), with outputs
// poisoned. The op registry's CUDA test covers the registry's small samples; this file covers
// sizes, the fused epilogues' results, the TF32 switch and the plan cache.
#include <cmath>

#include "core/generator.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/linear.h"
#include "kernels/matmul.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

namespace {

const Device kGpu = Device::cuda(0);

Tensor random(const Shape& shape, DType dtype, Generator& gen) { return uniform(shape, gen, -1, 1, DType::F64).to(dtype); }

// Sums of K products of [-1, 1] values: f32 differs from the CPU by reassociation only.
struct Bound {
  double atol, rtol;
};
Bound bound(DType dtype) {
  switch (dtype) {
    case DType::F64: return {1e-11, 1e-11};
    case DType::F32: return {1e-4, 1e-5};
    case DType::F16: return {2e-3, 2e-3};
    default: return {1e-2, 1e-2};  // bf16: one rounding step apart at most
  }
}

struct PoisonGuard {
  PoisonGuard() { cuda::set_allocation_poison(true); }
  ~PoisonGuard() { cuda::set_allocation_poison(false); }
};

}  // namespace

TEST_CASE("CUDA matmul matches the CPU on GPT-2 shapes and batched, broadcast, transposed operands", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  PoisonGuard poison;
  Generator gen(2024);
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{4, 64, 768}, {2304, 768}, false, true},    // c_attn forward (rows fold)
      {{256, 2304}, {2304, 768}, false, false},    // c_attn dx
      {{256, 3072}, {256, 768}, true, false},      // c_fc dW
      {{2, 12, 64, 64}, {2, 12, 64, 64}, false, true},  // q k^T per head (strided batch)
      {{2, 1, 33, 17}, {3, 17, 9}, false, false},  // broadcast batch (one GEMM per matrix)
      {{5, 7, 3}, {7, 4}, true, false},            // shared B, transposed A (no folding)
      {{1, 1}, {1, 1}, false, false},
      {{3, 1000}, {1000, 5}, false, false},        // long K, thin output
  };
  for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    for (const Case& c : cases) {
      INFO(dtype_name(dtype) << " " << shape_str(c.a) << (c.ta ? "^T" : "") << " x " << shape_str(c.b)
                             << (c.tb ? "^T" : ""));
      const Tensor a = random(c.a, dtype, gen), b = random(c.b, dtype, gen);
      const Tensor expected = matmul(a, b, c.ta, c.tb);
      const Tensor got = matmul(a.to(kGpu), b.to(kGpu), c.ta, c.tb);
      REQUIRE(got.device() == kGpu);
      FATHOM_REQUIRE_CLOSE(got.to(kCPU), expected, bound(dtype).atol, bound(dtype).rtol);
    }
  }
}

TEST_CASE("CUDA matmul_into accumulates into an output with padded rows", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(7);
  for (DType dtype : {DType::F32, DType::BF16}) {
    INFO(dtype_name(dtype));
    const Tensor a = random({3, 40, 24}, dtype, gen), b = random({3, 24, 56}, dtype, gen);
    const Tensor start = random({3, 40, 56}, dtype, gen);
    Tensor expected = start.clone();
    matmul_into(expected, a, b, false, false, /*accumulate=*/true);
    // A row-major output with padded rows: written in place (ldc = 64), the padding untouched.
    const Tensor padded_cpu = Tensor::zeros({3, 40, 64}, dtype);
    padded_cpu.slice(2, 0, 56).copy_(start);
    const Tensor padded = padded_cpu.to(kGpu);
    matmul_into(padded.slice(2, 0, 56), a.to(kGpu), b.to(kGpu), false, false, /*accumulate=*/true);
    const Tensor result = padded.to(kCPU);
    FATHOM_REQUIRE_CLOSE(result.slice(2, 0, 56), expected, bound(dtype).atol, bound(dtype).rtol);
    FATHOM_REQUIRE_CLOSE(result.slice(2, 56, 64), Tensor::zeros({3, 40, 8}, dtype), 0.0, 0.0);
  }
}

TEST_CASE("CUDA matmul on misaligned views (odd element offsets)", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(11);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    INFO(dtype_name(dtype));
    const Tensor a_big = random({1 + 37 * 29}, dtype, gen), b_big = random({3 + 29 * 41}, dtype, gen);
    const Tensor a = a_big.slice(0, 1, 1 + 37 * 29).reshape({37, 29});
    const Tensor b = b_big.slice(0, 3, 3 + 29 * 41).reshape({29, 41});
    const Tensor expected = matmul(a, b);
    const Tensor a_gpu = a_big.to(kGpu).slice(0, 1, 1 + 37 * 29).reshape({37, 29});
    const Tensor b_gpu = b_big.to(kGpu).slice(0, 3, 3 + 29 * 41).reshape({29, 41});
    FATHOM_REQUIRE_CLOSE(matmul(a_gpu, b_gpu).to(kCPU), expected, bound(dtype).atol, bound(dtype).rtol);
  }
}

TEST_CASE("CUDA matmul: TF32 is off by default and changes f32 results only when allowed", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  struct Restore {
    bool saved = cuda::allow_tf32();
    ~Restore() { cuda::set_allow_tf32(saved); }
  } restore;
  Generator gen(3);
  const Tensor a = random({512, 512}, DType::F32, gen).to(kGpu), b = random({512, 512}, DType::F32, gen).to(kGpu);
  cuda::set_allow_tf32(false);
  const Tensor strict = matmul(a, b).to(kCPU);
  FATHOM_REQUIRE_CLOSE(strict, matmul(a.to(kCPU), b.to(kCPU)), 1e-4, 1e-5);
  cuda::set_allow_tf32(true);
  CHECK(cuda::allow_tf32());
  const Tensor fast = matmul(a, b).to(kCPU);
  // TF32 keeps 10 mantissa bits of each input: sums of 512 products are off by ~1e-3 relative.
  FATHOM_REQUIRE_CLOSE(fast, strict, 0.1, 1e-2);
  CHECK(testing::mismatch(fast, strict, 0.0, 0.0) != "");  // tensor cores did take over
  // 16-bit operands are unaffected by the switch.
  const Tensor a16 = a.to(DType::BF16), b16 = b.to(DType::BF16);
  const Tensor with_tf32 = matmul(a16, b16).to(kCPU);
  cuda::set_allow_tf32(false);
  FATHOM_REQUIRE_CLOSE(matmul(a16, b16).to(kCPU), with_tf32, 0.0, 0.0);
}

TEST_CASE("CUDA GEMM plans are cached per shape", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  Generator gen(5);
  const Tensor a = random({96, 80}, DType::BF16, gen).to(kGpu), b = random({80, 72}, DType::BF16, gen).to(kGpu);
  matmul(a, b);
  const size_t plans = kernels::gemm_cublaslt_cached_plans(0);
  for (int i = 0; i < 3; ++i) matmul(a, b);
  CHECK(kernels::gemm_cublaslt_cached_plans(0) == plans);
  matmul(a, b, false, false);
  matmul(b, a, true, true);  // another problem: one more plan
  CHECK(kernels::gemm_cublaslt_cached_plans(0) == plans + 1);
}

TEST_CASE("CUDA linear and linear_gelu (fused epilogues) match the CPU, forward and backward", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  PoisonGuard poison;
  Generator gen(17);
  struct Case {
    Shape x;
    int64_t out;
  };
  // GPT-2's c_fc (3072 outputs: fused GELU), c_proj (a quarter of each when emulated), and an
  // output width that cannot carry the GELU aux matrix (13, not a multiple of 8: the unfused path).
  const Case cases[] = {testing::gpu_or_emulated(Case{{4, 64, 768}, 3072}, Case{{2, 32, 192}, 768}),
                        testing::gpu_or_emulated(Case{{256, 3072}, 768}, Case{{64, 768}, 192}),
                        {{3, 5, 24}, 13}};
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const Case& c : cases) {
      INFO(dtype_name(dtype) << " x " << shape_str(c.x) << " -> " << c.out);
      const int64_t in = c.x.back();
      const double scale = 1.0 / std::sqrt(static_cast<double>(in));
      const Tensor x = random(c.x, dtype, gen);
      const Tensor w = uniform({c.out, in}, gen, -scale, scale, DType::F64).to(dtype);
      const Tensor b = random({c.out}, dtype, gen);
      const Tensor xg = x.to(kGpu), wg = w.to(kGpu), bg = b.to(kGpu);
      const Bound tol = bound(dtype);

      FATHOM_REQUIRE_CLOSE(linear(xg, wg, bg).to(kCPU), linear(x, w, b), tol.atol, tol.rtol);
      const LinearGeluOutputs cpu = linear_gelu(x, w, b), gpu = linear_gelu(xg, wg, bg);
      FATHOM_REQUIRE_CLOSE(gpu.pre.to(kCPU), cpu.pre, tol.atol, tol.rtol);
      // The fused GELU reads the unrounded pre-activation, the CPU the rounded one.
      FATHOM_REQUIRE_CLOSE(gpu.out.to(kCPU), cpu.out, 2 * tol.atol, 2 * tol.rtol);

      Shape y_shape = c.x;
      y_shape.back() = c.out;
      const Tensor dy = random(y_shape, dtype, gen);
      const LinearGrads g_cpu = linear_backward(dy, x, w), g_gpu = linear_backward(dy.to(kGpu), xg, wg);
      FATHOM_REQUIRE_CLOSE(g_gpu.dx.to(kCPU), g_cpu.dx, tol.atol, tol.rtol);
      // dweight and dbias sum over all rows (up to 256): looser absolute bounds for 16-bit.
      FATHOM_REQUIRE_CLOSE(g_gpu.dweight.to(kCPU), g_cpu.dweight, 8 * tol.atol, tol.rtol);
      FATHOM_REQUIRE_CLOSE(g_gpu.dbias.to(kCPU), g_cpu.dbias, 8 * tol.atol, tol.rtol);
      const LinearGrads only_dw = linear_backward(dy.to(kGpu), xg, wg, false, true, false);
      CHECK_FALSE(only_dw.dx.defined());
      CHECK_FALSE(only_dw.dbias.defined());
      FATHOM_REQUIRE_CLOSE(only_dw.dweight.to(kCPU), g_cpu.dweight, 8 * tol.atol, tol.rtol);
    }
  }
}
