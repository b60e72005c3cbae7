#pragma once
// f16/bf16 <-> f32 on the GPU, for NCCL reductions that accumulate in f32. No CUDA header
// here: the stream is a cudaStream_t passed as void*.

#include <cstdint>

namespace fathom::parallel::nccl_convert {

void widen_to_f32(const void* src, float* dst, int64_t n, bool bf16, void* stream);
void narrow_from_f32(const float* src, void* dst, int64_t n, bool bf16, void* stream);

}  // namespace fathom::parallel::nccl_convert
