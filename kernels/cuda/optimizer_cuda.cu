// CUDA twins of the fused optimizer steps adam_step / sgd_step (kernels/cpu/optimizer_cpu.cpp),
// single- and multi-tensor. Layout: flat f32 params, grads and states, each tensor cut into
// chunks of launch::kStepChunk elements, one 256-thread block per chunk over a grid-stride
// loop. A multi-tensor launch reads the tensors' descriptions from a table in device memory and
// finds each chunk's tensor by binary search over their first chunks (as apex's
// multi_tensor_apply, but with the whole list in one launch). Threads take 4 floats at a time
// with 16-byte accesses when every buffer of the tensor is aligned (launch::step_vectorizable),
// one at a time otherwise and for the last n % 4 elements.
// Precision: f32 throughout, the CPU's expressions in the CPU's order, with the f32 scalars the
// CPU derives (AdamScalars / SgdScalars); IEEE division and square root. Both compilers may fuse
// a*b+c into an FMA in different places, so results agree with the CPU to an ulp or so, not bit
// for bit. The 16-bit copy of the new params is rounded once (round to nearest even).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "core/half.h"
#include "kernels/launch_geometry.h"
#include "kernels/optimizer_step_kernels.h"

namespace fathom::kernels {
namespace {

using launch::kStepChunk;
using launch::kStepThreads;

template <typename T>
struct alignas(4 * sizeof(T)) Quad {
  T v[4];
};

struct AdamOp {
  AdamScalars s;
  // p, m, v are updated in place; returns the new p.
  __device__ float operator()(float& p, float g, float& m, float& v) const {
    float grad = g;
    if (!s.adam_w_mode) grad += s.weight_decay * p;  // L2: weight decay joins the gradient
    const float mi = s.beta1 * m + (1.0f - s.beta1) * grad;
    const float vi = s.beta2 * v + (1.0f - s.beta2) * grad * grad;
    m = mi;
    v = vi;
    const float denom = sqrtf(vi / s.bias_correction2) + s.eps;
    float update = (mi / s.bias_correction1) / denom;
    if (s.adam_w_mode) update += s.weight_decay * p;  // AdamW: decoupled weight decay
    p = p - s.lr * update;
    return p;
  }
};

struct SgdOp {
  SgdScalars s;
  // p and the momentum buffer b are updated in place (b only with momentum); returns the new p.
  __device__ float operator()(float& p, float g, float& b, float&) const {
    float grad = g + s.weight_decay * p;
    if (s.momentum != 0.0f) {
      const float next_b = s.first_step ? grad : s.momentum * b + (1.0f - s.dampening) * grad;
      b = next_b;
      grad = s.nesterov ? grad + s.momentum * next_b : next_b;
    }
    p = p - s.lr * grad;
    return p;
  }
};

// The "grads" of a scale are its own values (the launcher aliases them): nothing else is read.
struct ScaleOp {
  float factor;
  __device__ float operator()(float& p, float, float&, float&) const {
    p = p * factor;
    return p;
  }
};

__device__ int copy_bytes(const StepTensor& t) {
  if (t.copy == nullptr) return 0;
  return t.copy_dtype == DType::F32 ? 4 : 2;
}

__device__ void store_copy(const StepTensor& t, int64_t i, float value) {
  switch (t.copy_dtype) {
    case DType::F32: static_cast<float*>(t.copy)[i] = value; break;
    case DType::BF16: static_cast<BFloat16*>(t.copy)[i] = BFloat16(value); break;
    case DType::F16: static_cast<Half*>(t.copy)[i] = Half(value); break;
    default: break;  // the host accepts f32, bf16 and f16 copies only
  }
}

template <typename T>
__device__ void store_copy_quad(void* copy, int64_t i, const float (&values)[4]) {
  Quad<T> q;
#pragma unroll
  for (int k = 0; k < 4; ++k) q.v[k] = T(values[k]);
  *reinterpret_cast<Quad<T>*>(static_cast<T*>(copy) + i) = q;
}

// Elements [start, end) of tensor t; start is a multiple of 4 (a chunk boundary).
template <typename Op>
__device__ void step_range(const StepTensor& t, int64_t start, int64_t end, const Op& op) {
  const bool has0 = t.state0 != nullptr, has1 = t.state1 != nullptr, has_copy = t.copy != nullptr;
  int64_t scalar_from = start;
  if (launch::step_vectorizable(reinterpret_cast<uint64_t>(t.params), reinterpret_cast<uint64_t>(t.grads),
                                reinterpret_cast<uint64_t>(t.state0), reinterpret_cast<uint64_t>(t.state1),
                                reinterpret_cast<uint64_t>(t.copy), copy_bytes(t))) {
    const int64_t vector_end = start + (end - start) / 4 * 4;
    for (int64_t i = start + 4 * static_cast<int64_t>(threadIdx.x); i < vector_end; i += 4 * int64_t{blockDim.x}) {
      Quad<float> p = *reinterpret_cast<const Quad<float>*>(t.params + i);
      const Quad<float> g = *reinterpret_cast<const Quad<float>*>(t.grads + i);
      Quad<float> s0 = {}, s1 = {};
      if (has0) s0 = *reinterpret_cast<const Quad<float>*>(t.state0 + i);
      if (has1) s1 = *reinterpret_cast<const Quad<float>*>(t.state1 + i);
      float next[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) next[k] = op(p.v[k], g.v[k], s0.v[k], s1.v[k]);
      *reinterpret_cast<Quad<float>*>(t.params + i) = p;
      if (has0) *reinterpret_cast<Quad<float>*>(t.state0 + i) = s0;
      if (has1) *reinterpret_cast<Quad<float>*>(t.state1 + i) = s1;
      if (has_copy) {
        switch (t.copy_dtype) {
          case DType::F32: store_copy_quad<float>(t.copy, i, next); break;
          case DType::BF16: store_copy_quad<BFloat16>(t.copy, i, next); break;
          case DType::F16: store_copy_quad<Half>(t.copy, i, next); break;
          default: break;
        }
      }
    }
    scalar_from = vector_end;
  }
  for (int64_t i = scalar_from + threadIdx.x; i < end; i += blockDim.x) {
    float p = t.params[i];
    float s0 = has0 ? t.state0[i] : 0.0f, s1 = has1 ? t.state1[i] : 0.0f;
    const float next = op(p, t.grads[i], s0, s1);
    t.params[i] = p;
    if (has0) t.state0[i] = s0;
    if (has1) t.state1[i] = s1;
    if (has_copy) store_copy(t, i, next);
  }
}

__device__ int64_t chunk_end(const StepTensor& t, int64_t start) {
  return start + kStepChunk < t.n ? start + kStepChunk : t.n;
}

template <typename Op>
__global__ void __launch_bounds__(kStepThreads) step_kernel(StepTensor tensor, Op op) {
  const int64_t chunks = launch::step_chunks(tensor.n);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t start = c * kStepChunk;
    step_range(tensor, start, chunk_end(tensor, start), op);
  }
}

// table: `count` tensors with elements, in increasing first_chunk order from 0.
template <typename Op>
__global__ void __launch_bounds__(kStepThreads)
    step_multi_kernel(const StepTensor* table, int64_t count, int64_t total_chunks, Op op) {
  for (int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const int64_t owner = launch::chunk_owner([table](int64_t k) { return table[k].first_chunk; }, count, c);
    const StepTensor tensor = table[owner];
    const int64_t start = (c - tensor.first_chunk) * kStepChunk;
    step_range(tensor, start, chunk_end(tensor, start), op);
  }
}

int blocks_for(int64_t chunks) {
  return static_cast<int>(chunks < launch::kStepMaxBlocks ? chunks : launch::kStepMaxBlocks);
}

template <typename Op>
void launch_single(const StepTensor& tensor, const Op& op, void* stream, const char* name) {
  if (tensor.n <= 0) return;
  FATHOM_LAUNCH(blocks_for(launch::step_chunks(tensor.n)), kStepThreads, 0, static_cast<cudaStream_t>(stream),
                step_kernel<Op>)
  (tensor, op);
  FATHOM_CUDA_CHECK_LAUNCH(name);
}

template <typename Op>
void launch_multi(const StepTensor* tensors, int64_t count, const Op& op, void* table, void* stream,
                  const char* name) {
  std::vector<StepTensor> entries;
  int64_t total_chunks = 0;
  for (int64_t k = 0; k < count; ++k) {
    if (tensors[k].n <= 0) continue;  // no chunk: left out, so every entry owns one at least
    StepTensor& entry = entries.emplace_back(tensors[k]);
    entry.first_chunk = total_chunks;
    total_chunks += launch::step_chunks(entry.n);
  }
  if (entries.empty()) return;
  const auto s = static_cast<cudaStream_t>(stream);
  // A pageable source: the call returns once `entries` has been read, so it may go out of scope.
  const cudaError_t status = cudaMemcpyAsync(table, entries.data(), entries.size() * sizeof(StepTensor),
                                             cudaMemcpyHostToDevice, s);
  if (status != cudaSuccess)
    cuda::fail((std::string(name) + ": copying the tensor table failed: " + cudaGetErrorString(status)).c_str(),
               __FILE__, __LINE__);
  FATHOM_LAUNCH(blocks_for(total_chunks), kStepThreads, 0, s, step_multi_kernel<Op>)
  (static_cast<const StepTensor*>(table), static_cast<int64_t>(entries.size()), total_chunks, op);
  FATHOM_CUDA_CHECK_LAUNCH(name);
}

}  // namespace

void adam_step_cuda(const StepTensor& tensor, const AdamScalars& scalars, void* stream) {
  launch_single(tensor, AdamOp{scalars}, stream, "adam_step_kernel");
}

void sgd_step_cuda(const StepTensor& tensor, const SgdScalars& scalars, void* stream) {
  launch_single(tensor, SgdOp{scalars}, stream, "sgd_step_kernel");
}

void adam_step_multi_cuda(const StepTensor* tensors, int64_t count, const AdamScalars& scalars, void* table,
                          void* stream) {
  launch_multi(tensors, count, AdamOp{scalars}, table, stream, "adam_step_multi_kernel");
}

void sgd_step_multi_cuda(const StepTensor* tensors, int64_t count, const SgdScalars& scalars, void* table,
                         void* stream) {
  launch_multi(tensors, count, SgdOp{scalars}, table, stream, "sgd_step_multi_kernel");
}

void scale_multi_cuda(const StepTensor* tensors, int64_t count, float factor, void* table, void* stream) {
  launch_multi(tensors, count, ScaleOp{factor}, table, stream, "scale_multi_kernel");
}

}  // namespace fathom::kernels
