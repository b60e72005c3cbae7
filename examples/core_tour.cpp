// A tour of the core API: tensors and views, dtypes, broadcasting, memory tags and the RNG.
// Run: build/examples/core_tour
#include <fathom.h>

#include <iostream>

using namespace fathom;

int main() {
  Generator gen(/*seed=*/42);
  const Tensor x = uniform({4, 3}, gen);         // f32 on the CPU, values in [0, 1)
  const Tensor w = Tensor::ones({3}, DType::BF16);  // 16-bit storage, f32 arithmetic
  const Tensor xt = x.t();                        // a view: no copy, strides swapped
  std::cout << "x^T shares x's storage: " << std::boolalpha << xt.shares_storage(x) << "\n";

  const Tensor y = add(x, w.to(DType::F32));  // broadcasting: [4, 3] + [3]
  std::cout << y << "\n";

  {
    MemoryTagScope tag(MemoryTag::Gradients);  // what the next allocations are for
    const Tensor g = Tensor::zeros({1024, 1024});
    const MemorySnapshot mem = memory_snapshot(kCPU);
    std::cout << "gradient bytes: " << mem[MemoryTag::Gradients].current << "\n";
  }
  std::cout << "gradient peak:  " << memory_snapshot(kCPU)[MemoryTag::Gradients].peak << "\n";

  try {
    add(x, Tensor::zeros({5}));
  } catch (const Error& e) {
    std::cout << "error: " << e.message() << "\n";
  }
  std::cout << "CUDA devices: " << cuda::device_count();
  if (cuda::device_count() == 0) std::cout << " (" << cuda::unavailable_reason() << ")";
  std::cout << "\n";
  return 0;
}
