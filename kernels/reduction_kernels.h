#pragma once
// Kernel entry points of the reductions (CPU and CUDA). The layout splits the input's dims into
// kept ones (one output element per index) and reduced ones (walked in row-major order). Light
// header: .cu files include it.

#include "core/dtype.h"
#include "core/shape.h"
#include "kernels/launch_geometry.h"
#include "kernels/reduce_op.h"

namespace fathom::kernels {

struct ReduceLayout {
  Shape kept_sizes;         // output element order
  Strides kept_strides;     // input strides of the kept dims
  Shape reduced_sizes;
  Strides reduced_strides;  // input strides of the reduced dims
};

// The same reduction with fewer dims: size-1 dims dropped, and neighbouring dims of a group
// (kept or reduced) merged where the outer one steps exactly over the inner one. Output order
// and reduced positions (what argmax returns, where chunks begin) are unchanged, so every
// kernel gives the same result on either layout. An empty group becomes one dim of size 0.
ReduceLayout merge_dims(const ReduceLayout& layout);

// out: contiguous, one element per kept index, of dtype `out_dtype`.
void reduce_cpu(ReduceOp op, DType in_dtype, DType out_dtype, void* out, const void* in, const ReduceLayout& layout,
                int64_t correction);

// --- CUDA: the layout in fixed arrays (kernel arguments), after merge_dims ---

inline constexpr int kMaxReduceDims = 8;

struct ReduceDims {
  int ndim = 0;
  int64_t sizes[kMaxReduceDims] = {};
  int64_t strides[kMaxReduceDims] = {};
};

struct ReduceLayoutCuda {
  ReduceDims kept, reduced;
  int64_t outputs = 1;  // product of kept sizes
  int64_t reduced_numel = 1;
};

// The launch plan of reduce_cuda for `layout`; its workspace_bytes is what the caller allocates.
inline launch::ReducePlan reduce_plan(const ReduceLayoutCuda& layout) {
  auto inner = [](const ReduceDims& dims) {
    const int64_t s = dims.ndim > 0 ? dims.strides[dims.ndim - 1] : 0;
    return s < 0 ? -s : s;
  };
  return launch::plan_reduction(layout.outputs, layout.reduced_numel, inner(layout.kept), inner(layout.reduced));
}

// out: contiguous device buffer of layout.outputs elements of `out_dtype`. workspace: device
// memory of reduce_plan(layout).workspace_bytes (8-byte aligned), or null when that is 0.
// Floating-point values accumulate in f64, integer sums in i64, as on the CPU.
void reduce_cuda(ReduceOp op, DType in_dtype, DType out_dtype, void* out, const void* in,
                 const ReduceLayoutCuda& layout, int64_t correction, void* workspace, void* stream);

// global_norm's multi-tensor form: the sum of squares (f64) of each of `count` contiguous f32
// tensors (a host array), written to each entry's `out`, in two launches for the whole list.
// Each tensor is cut into chunks of kSquaresChunk elements; a block reduces a chunk in a fixed
// tree into partials[chunk], then one thread per tensor adds its chunks in order:
// deterministic, no atomics. table: count * sizeof(SquaresTensor) bytes of device memory (the
// list is copied there on `stream`); partials: the list's total squares_chunks doubles.
inline constexpr int64_t kSquaresChunk = int64_t{1} << 16;
inline constexpr int64_t squares_chunks(int64_t n) { return (n + kSquaresChunk - 1) / kSquaresChunk; }
struct SquaresTensor {
  const float* data = nullptr;
  int64_t n = 0;            // > 0
  double* out = nullptr;    // device memory
  int64_t first_chunk = 0;  // filled in by the launcher
};
void sum_of_squares_multi_cuda(const SquaresTensor* tensors, int64_t count, void* table, double* partials,
                               void* stream);

}  // namespace fathom::kernels
