// The C++ snippets of docs/core.md, verbatim (docs_check compares them); "docs:skip" lines are
// the scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <iostream>  // docs:skip
#include <fathom.h>
using namespace fathom;

TEST_CASE("core.md: a first look") {  // docs:skip
Generator gen(/*seed=*/42);
Tensor x = uniform({4, 3}, gen);                 // f32 on the CPU, values in [0, 1)
Tensor w = Tensor::ones({3}, DType::BF16);       // 16-bit storage, f32 arithmetic
Tensor xt = x.t();                               // a view: no copy, strides swapped
Tensor y = add(x, w.to(DType::F32));             // broadcasting: [4, 3] + [3]
std::cout << y << "\n";                          // prints dtype, device, shape and values
{
  MemoryTagScope tag(MemoryTag::Gradients);      // what the next allocations are for
  Tensor g = Tensor::zeros({1024, 1024});
}
MemorySnapshot mem = memory_snapshot(kCPU);      // exact bytes per tag, current and peak
  CHECK(mem[MemoryTag::Gradients].peak >= 1024 * 1024 * 4);  // docs:skip
  CHECK(xt.sizes() == Shape{3, 4});  // docs:skip
}  // docs:skip

TEST_CASE("core.md: memory accounting") {  // docs:skip
  Tensor t = Tensor::zeros({16});  // docs:skip
{
  MemoryTagScope scope(MemoryTag::Parameters);   // thread-local, nests
  Tensor w = Tensor::empty({768, 768});
}
MemorySnapshot snap = memory_snapshot();          // snap[MemoryTag::Parameters].peak
allocator_for(kCPU).stats().reset_peak();
t.storage()->retag(MemoryTag::Gradients);          // move a block's bytes to another tag
  CHECK(snap[MemoryTag::Parameters].peak >= 768 * 768 * 4);  // docs:skip
}  // docs:skip
