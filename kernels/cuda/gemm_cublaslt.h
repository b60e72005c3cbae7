#pragma once
// GEMMs on CUDA through cuBLASLt, for the matmul and linear ops (CUDA builds only).
//
// One cuBLASLt handle per device, created on first use. Plans (the matmul descriptor, the three
// matrix layouts and the algorithm the heuristic picked) are cached per problem and pointer
// alignment (kernels/gemm_problem.h's GemmKey). Each (device, stream) gets its own 32 MiB
// workspace from the device allocator (tag Other), so GEMMs on different streams never share
// scratch memory. The header includes no CUDA header.

#include <cstddef>

#include "kernels/gemm_problem.h"

namespace fathom::kernels {

inline constexpr size_t kCublasLtWorkspaceBytes = size_t{32} << 20;

struct GemmPointers {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  void* bias = nullptr;  // read for Bias/GeluBias, written for BiasGrad
  void* aux = nullptr;   // written for Gelu/GeluBias
};

// Enqueues the GEMM on `stream` (a cudaStream_t) of `device`. Returns false, having enqueued
// nothing, when the problem has an epilogue that cuBLASLt cannot fuse for it (the caller then
// does the epilogue's work in separate passes). Throws for a malformed problem or when a plain
// GEMM finds no algorithm.
bool gemm_cublaslt(const GemmProblem& problem, const GemmPointers& pointers, int device, void* stream);

// Number of cached plans of `device` (for tests of the cache).
size_t gemm_cublaslt_cached_plans(int device);

}  // namespace fathom::kernels
