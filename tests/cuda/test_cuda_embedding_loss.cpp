// What the registry's CUDA comparison does not reach for embedding and cross-entropy: the
// embedding backward's determinism on skewed token counts (one token at a third of the
// positions), its bit-for-bit agreement with the CPU (same summation order), device-side index
// errors that read as the CPU's and leave dweight untouched, and cross-entropy over a GPT-2
// sized vocabulary (odd V: element-wise loads) with ignored rows.
#include <algorithm>
#include <cstring>

#include "core/generator.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::testing;

namespace {

const Device kGpu = Device::cuda(0);

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(kCPU).contiguous(), y = b.to(kCPU).contiguous();
  return x.nbytes() == 0 || std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;  // empty: no data pointer
}

// N indices below V; every third is one token (3, or V - 1 when V is smaller), the rest uniform.
Tensor skewed_indices(int64_t N, int64_t V, DType dtype, Generator& gen) {
  std::vector<int64_t> idx = randint({N}, gen, 0, V).to_vector<int64_t>();
  for (int64_t n = 0; n < N; n += 3) idx[n] = std::min<int64_t>(3, V - 1);
  return Tensor::from_vector(idx, {N}).to(dtype);
}

}  // namespace

TEST_CASE("CUDA embedding: lookup and deterministic backward equal the CPU bit for bit", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cuda::set_allocation_poison(true);
  Generator gen(77);
  struct Case {
    int64_t N, V, C;
  };
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (DType index_dtype : {DType::I64, DType::I32}) {
      const Case large = testing::gpu_or_emulated(Case{20000, 5003, 768}, Case{4000, 1003, 96});
      for (const Case c : {large, Case{777, 50, 13}, Case{1, 1, 1}}) {
        INFO(dtype_name(dtype) << ", " << dtype_name(index_dtype) << " indices, N " << c.N << ", V " << c.V << ", C "
                               << c.C);
        const Tensor indices = skewed_indices(c.N, c.V, index_dtype, gen);
        const Tensor weight = uniform({c.V, c.C}, gen, -1, 1, DType::F64).to(dtype);
        CHECK(same_bits(embedding(indices.to(kGpu), weight.to(kGpu)), embedding(indices, weight)));

        const Tensor dout = uniform({c.N, c.C}, gen, -1, 1, DType::F64).to(dtype);
        const Tensor expected = embedding_backward(dout, indices, c.V);
        const Tensor first = embedding_backward(dout.to(kGpu), indices.to(kGpu), c.V);
        const Tensor second = embedding_backward(dout.to(kGpu), indices.to(kGpu), c.V);
        CHECK(same_bits(first, expected));
        CHECK(same_bits(second, first));

        // Accumulating into an existing gradient.
        const Tensor grad_cpu = uniform({c.V, c.C}, gen, -1, 1, DType::F64).to(dtype);
        const Tensor grad_gpu = grad_cpu.to(kGpu);
        embedding_backward_into(grad_cpu, dout, indices, /*accumulate=*/true);
        embedding_backward_into(grad_gpu, dout.to(kGpu), indices.to(kGpu), /*accumulate=*/true);
        CHECK(same_bits(grad_gpu, grad_cpu));
      }
    }
  }
  cuda::set_allocation_poison(false);
}

TEST_CASE("CUDA embedding: out-of-range indices fail as on the CPU and write no gradient", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const Tensor weight = Tensor::ones({7, 3}).to(kGpu);
  const Tensor bad = Tensor::from_vector<int64_t>({1, 9, 0, 12});
  CHECK(error_of([&] { embedding(bad.to(kGpu), weight); }) ==
        error_of([&] { embedding(bad, weight.to(kCPU)); }));
  CHECK(error_of([&] { embedding(bad.to(kGpu), weight); }) ==
        "embedding: index 9 at (flat) position 1 is out of range for an embedding of 7 rows (valid: 0 to 6)");
  const Tensor negative = Tensor::from_vector<int32_t>({0, 0, -1}).to(kGpu);
  CHECK(error_of([&] { embedding(negative, weight); }) ==
        "embedding: index -1 at (flat) position 2 is out of range for an embedding of 7 rows (valid: 0 to 6)");

  const Tensor grad = Tensor::full({7, 3}, 0.5).to(kGpu);
  const Tensor dout = Tensor::ones({4, 3}).to(kGpu);
  CHECK(error_of([&] { embedding_backward_into(grad, dout, bad.to(kGpu), true); }) ==
        "embedding_backward: index 9 at (flat) position 1 is out of range for an embedding of 7 rows (valid: 0 to 6)");
  CHECK(same_bits(grad, Tensor::full({7, 3}, 0.5)));
  // A later good call works: the flag is fresh per call.
  CHECK_NOTHROW(embedding(Tensor::from_vector<int64_t>({6, 0}).to(kGpu), weight));
  // Zero-width rows still have their indices checked.
  CHECK(error_of([&] { embedding(bad.to(kGpu), Tensor::zeros({7, 0}).to(kGpu)); }) ==
        "embedding: index 9 at (flat) position 1 is out of range for an embedding of 7 rows (valid: 0 to 6)");
}

TEST_CASE("CUDA cross-entropy over a GPT-2 vocabulary matches the CPU", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cuda::set_allocation_poison(true);
  Generator gen(5);
  const int64_t N = 96, V = 50257;
  std::vector<int64_t> t = randint({N}, gen, 0, V).to_vector<int64_t>();
  for (int64_t r = 0; r < N; r += 7) t[r] = -100;
  const Tensor targets = Tensor::from_vector(t, {N});
  for (DType dtype : {DType::F32, DType::BF16}) {
    INFO(dtype_name(dtype));
    const double rtol = dtype == DType::F32 ? 1e-5 : 1e-2;
    const Tensor logits = uniform({N, V}, gen, -8, 8, DType::F64).to(dtype);
    const CrossEntropyOutputs cpu = cross_entropy(logits, targets);
    const CrossEntropyOutputs gpu = cross_entropy(logits.to(kGpu), targets.to(kGpu));
    FATHOM_REQUIRE_CLOSE(gpu.loss, cpu.loss, 1e-6, 1e-5);  // lse and loss are f32 for both dtypes
    FATHOM_REQUIRE_CLOSE(gpu.lse, cpu.lse, 1e-6, 1e-5);
    const Tensor dloss = Tensor::scalar(0.75);
    const Tensor dlse = uniform({N}, gen, -0.5, 0.5);
    const Tensor expected = cross_entropy_backward(dloss, logits, targets, cpu.lse, std::nullopt, -100, dlse);
    const Tensor got = cross_entropy_backward(dloss.to(kGpu), logits.to(kGpu), targets.to(kGpu), gpu.lse,
                                              std::nullopt, -100, dlse.to(kGpu));
    FATHOM_REQUIRE_CLOSE(got, expected, 1e-8, rtol);
  }
  cuda::set_allocation_poison(false);
}
