// The CUDA add kernel against its CPU twin, on fresh random inputs with a poisoned output.
#include <cmath>

#include "core/generator.h"
#include "kernels/elementwise.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

namespace {
struct Case {
  Shape a, b;
  bool transpose_b;
};
}  // namespace

TEST_CASE("CUDA add matches the CPU twin (broadcast, strided, accumulate, all dtypes)", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  Generator gen(99);
  const Case cases[] = {
      testing::gpu_or_emulated(Case{{1000003}, {1000003}, false},  // odd size, many blocks
                               Case{{100003}, {100003}, false}),
      {{4, 64, 768}, {768}, false},    // bias-style broadcast
      {{33, 1, 7}, {5, 1}, false},     // broadcast on both sides
      {{17, 9}, {9, 17}, true},        // transposed (non-contiguous) operand
      {{}, {3, 2}, false},             // scalar
  };
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    for (const Case& c : cases) {
      INFO("dtype " << dtype_name(dtype) << ", shapes " << shape_str(c.a) << " + " << shape_str(c.b));
      const Tensor a = uniform(c.a, gen, -50, 50, DType::F64).to(dtype);
      Tensor b = uniform(c.b, gen, -50, 50, DType::F64).to(dtype);
      if (c.transpose_b) b = b.t();
      const Tensor expected = add(a, b);
      const Tensor a_gpu = a.to(gpu);
      const Tensor b_gpu = c.transpose_b ? b.t().contiguous().to(gpu).t() : b.to(gpu);
      const double poison = is_floating_point(dtype) ? std::nan("") : -12345.0;
      Tensor out = Tensor::full(expected.sizes(), poison, dtype, gpu);
      binary_into(BinaryOp::Add, out, a_gpu, b_gpu);
      // The same arithmetic in the same order: bit-identical, also for 16-bit types.
      FATHOM_REQUIRE_CLOSE(out, expected, 0.0, 0.0);
      binary_into(BinaryOp::Add, out, a_gpu, b_gpu, /*accumulate=*/true);
      Tensor twice = expected.clone();
      binary_into(BinaryOp::Add, twice, a, b, /*accumulate=*/true);
      FATHOM_REQUIRE_CLOSE(out, twice, 0.0, 0.0);
    }
  }
}

TEST_CASE("CUDA add rejects operands on different devices", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const Tensor host = Tensor::ones({3});
  const Tensor device = host.to(Device::cuda(0));
  CHECK_THROWS_WITH(add(host, device), Catch::Contains("add: expected tensors on the same device, got cpu and cuda:0"));
  // A strided view converted on the device (the copy kernel) equals the CPU's conversion.
  const Tensor counting = Tensor::arange(6, DType::F32);
  CHECK(counting.to(Device::cuda(0)).as_strided({2}, {2}, 1).to(DType::F64).to(kCPU).to_vector<double>() ==
        std::vector<double>{1, 3});
}
