#pragma once
// Internal: the own micro-kernels, one set per instruction-set flavour, with their cache
// blocks. Each comes from its own file compiled with that flavour's target attributes; only
// call a flavour's functions when gemm_isa_supported() says the CPU runs it.

#include "core/half.h"
#include "kernels/cpu/gemm_blocked.h"

namespace fathom::kernels::gemm_detail {

MicroKernel<float, float> portable_f32_kernel();
MicroKernel<double, double> portable_f64_kernel();
// Emulates the AVX512_BF16 kernel's pair arithmetic in plain vectors (slow): lets tests check the
// bf16 pair packing on any CPU.
MicroKernel<BFloat16, float> portable_bf16_pair_kernel();
// Computes from the AMX kernel's packed layout (A rows in 32s, B in pairs, 32 x 32 tiles) in
// plain C++ (slow): lets tests check that layout on any CPU.
MicroKernel<BFloat16, float> portable_amx_layout_kernel();

MicroKernel<float, float> avx2_f32_kernel();
MicroKernel<double, double> avx2_f64_kernel();

MicroKernel<float, float> avx512_f32_kernel();
MicroKernel<double, double> avx512_f64_kernel();
// Needs AVX512_BF16 besides the AVX-512 flavour: A and B packed as bf16 pairs along k.
MicroKernel<BFloat16, float> avx512_bf16_kernel();
// Needs AMX-TILE and AMX-BF16 and the OS's leave to use them (amx_bf16_usable asks for it).
MicroKernel<BFloat16, float> amx_bf16_kernel();
bool amx_bf16_usable();

}  // namespace fathom::kernels::gemm_detail
