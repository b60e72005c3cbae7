// Device copies (core/copy.cpp -> core/cuda/copy_cuda.cu) against the CPU's: every dtype pair,
// transposed, broadcast and strided layouts, fills, and copies across devices, into outputs
// poisoned with 0xFF bytes (NaN) so an unwritten element shows.
#include <cmath>
#include <limits>
#include <vector>

#include "core/copy.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

namespace {
const Device kGpu = Device::cuda(0);

class PoisonScope {
 public:
  PoisonScope() : previous_(cuda::allocation_poison()) { cuda::set_allocation_poison(true); }
  ~PoisonScope() { cuda::set_allocation_poison(previous_); }

 private:
  bool previous_;
};

// Exact equality in the dtype's own terms (NaN equals NaN; integers compared as integers).
void require_same(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.dtype() == expected.dtype());
  REQUIRE(actual.sizes() == expected.sizes());
  if (is_floating_point(expected.dtype())) {
    FATHOM_REQUIRE_CLOSE(actual, expected, 0.0, 0.0);
  } else {
    REQUIRE(actual.to_vector<int64_t>() == expected.to_vector<int64_t>());
  }
}

// Random values plus the cases where conversions differ: ties, f16 overflow and subnormals,
// integers beyond f32's 24 bits, out-of-range for i32, NaN and infinities, signed zeros.
Tensor test_values() {
  Generator gen(2024);
  std::vector<double> values = uniform({4099}, gen, -300, 300, DType::F64).to_vector<double>();
  const double inf = std::numeric_limits<double>::infinity();
  for (double v : {0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 1.0 + 1.0 / 2048, 65504.0, 65519.0, 65520.0, 1e-8, 6e-8, -3e-5,
                   16777217.0, 3e9, -3e9, 1e20, -1e300, 1e-300, 255.5, std::nan(""), inf, -inf})
    values.push_back(v);
  return Tensor::from_vector(values);
}
}  // namespace

TEST_CASE("device conversions between every dtype pair match the CPU bit for bit", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  PoisonScope poison;
  const Tensor values = test_values();
  for (DType from : kAllDTypes) {
    const Tensor src = values.to(from);  // converted on the CPU
    const Tensor src_gpu = src.to(kGpu);  // bytes only
    for (DType to : kAllDTypes) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      const Tensor expected = src.to(to);
      require_same(src_gpu.to(to).to(kCPU), expected);  // on the device
      // Across devices with a conversion: converted on the destination's side.
      const Tensor up = Tensor::empty(src.sizes(), to, kGpu);
      copy_into(up, src);
      require_same(up.to(kCPU), expected);
      const Tensor down = Tensor::empty(src.sizes(), to, kCPU);
      copy_into(down, src_gpu);
      require_same(down, expected);
    }
  }
}

TEST_CASE("device copies of transposed, broadcast and strided tensors match the CPU", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  PoisonScope poison;
  Generator gen(5);
  const Tensor a = uniform({37, 53}, gen, -10, 10, DType::F32);
  const Tensor a_gpu = a.to(kGpu);

  // Transposed source, with a conversion.
  require_same(a_gpu.t().to(DType::BF16).to(kCPU), a.t().to(DType::BF16));
  require_same(a_gpu.t().contiguous().to(kCPU), a.t().contiguous());

  // Broadcast source (a row over a batch), into a permuted destination.
  const Tensor row = uniform({53}, gen, -10, 10, DType::F64);
  Tensor dst_cpu = Tensor::full({4, 53, 3}, std::nan(""), DType::F16).permute({0, 2, 1});  // [4, 3, 53]
  Tensor dst_gpu = Tensor::empty({4, 53, 3}, DType::F16, kGpu).permute({0, 2, 1});
  dst_cpu.copy_(row);
  dst_gpu.copy_(row.to(kGpu));
  require_same(dst_gpu.to(kCPU), dst_cpu);

  // A strided destination inside a poisoned buffer: every other column of rows 2..7. What the
  // copy must not touch stays NaN on both sides.
  const Tensor big_cpu = Tensor::full({10, 64}, std::nan(""), DType::F32);
  const Tensor big_gpu = Tensor::empty({10, 64}, DType::F32, kGpu);
  const Tensor src = uniform({6, 1}, gen, -5, 5, DType::F32).to(DType::I32);
  big_cpu.slice(0, 2, 8).slice(1, 1, 64, 2).copy_(src);
  big_gpu.slice(0, 2, 8).slice(1, 1, 64, 2).copy_(src.to(kGpu));
  require_same(big_gpu.to(kCPU), big_cpu);

  // A 3-D slice of a 4-D tensor going to the host: made contiguous on the device first.
  const Tensor four = uniform({3, 4, 5, 6}, gen, -1, 1, DType::F64);
  const Tensor view = four.to(kGpu).permute({3, 1, 0, 2}).select(2, 1);
  require_same(view.to(kCPU), four.permute({3, 1, 0, 2}).select(2, 1).contiguous());
  // And a host view into a strided device destination, with a conversion.
  const Tensor dst = Tensor::empty({6, 4, 5}, DType::F16, kGpu);
  copy_into(dst.transpose(0, 2), four.select(0, 2).permute({1, 0, 2}));
  require_same(dst.transpose(0, 2).to(kCPU), four.select(0, 2).permute({1, 0, 2}).to(DType::F16));
  CHECK_THROWS_WITH(Tensor::empty({3, 4}, DType::F32, kGpu).copy_(Tensor::ones({5}, DType::F32, kGpu)),
                    Catch::Contains("cannot broadcast shape [5] to [3, 4]"));
}

TEST_CASE("device fill converts like the CPU and writes only the view", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  PoisonScope poison;
  for (DType dtype : kAllDTypes) {
    for (double value : {-3.7, 2.5, 1e10, 65520.0, 0.0}) {
      INFO(dtype_name(dtype) << " fill " << value);
      const Tensor gpu = Tensor::zeros({9, 11}, dtype, kGpu);
      const Tensor cpu = Tensor::zeros({9, 11}, dtype);
      gpu.slice(1, 2, 11, 3).fill_(value);
      cpu.slice(1, 2, 11, 3).fill_(value);
      require_same(gpu.to(kCPU), cpu);
      require_same(Tensor::full({5}, value, dtype, kGpu).to(kCPU), Tensor::full({5}, value, dtype));
    }
  }
#if !defined(FATHOM_CUDA_EMULATION)  // 2^31 threads' work: hours on the emulator
  // More elements than a 32-bit index reaches, and than one pass of the grid covers.
  const int64_t n = (int64_t{1} << 31) + 77;
  const Tensor flags = Tensor::zeros({n}, DType::Bool, kGpu);
  flags.fill_(1.0);
  const Tensor host = flags.to(kCPU);
  const bool* data = host.data<bool>();
  int64_t set = 0;
  for (int64_t i = 0; i < n; ++i) set += data[i] ? 1 : 0;
  CHECK(set == n);
#endif
  Tensor::empty({0, 3}, DType::F32, kGpu).fill_(1.0);  // nothing to do
}
