#pragma once
// Internal: which implementation runs Fathom's CPU GEMM, for tests and the benchmark.
//
// The build option FATHOM_CPU_GEMM picks the default backend for f32/f64 (own | eigen |
// openblas); each backend compiled into the library can be chosen at run time. Own kernels come
// in instruction-set flavours chosen from the CPU at start-up (AVX-512 with AMX tiles for bf16,
// AVX-512, AVX2+FMA, portable C++);
// tests force a lower flavour to check that it agrees with the others. 16-bit operands always use
// the own kernels.

namespace fathom::kernels {

enum class GemmBackend { Own, Eigen, OpenBlas };
// Amx: the AVX-512 kernels, and bf16 products on AMX tiles (Intel Sapphire Rapids and later).
enum class GemmIsa { Portable, Avx2, Avx512, Amx };

const char* gemm_backend_name(GemmBackend backend);
const char* gemm_isa_name(GemmIsa isa);

// Whether a backend was compiled into this build.
bool gemm_backend_available(GemmBackend backend);
// Whether this CPU (and OS) can run an instruction-set flavour.
bool gemm_isa_supported(GemmIsa isa);
// Whether the AVX-512 flavour multiplies bf16 with vdpbf16ps (AVX512_BF16) on this CPU;
// otherwise bf16 is widened to f32 while packing. (The Amx flavour uses tiles instead.)
bool gemm_has_bf16_dot();

GemmBackend gemm_backend();
void set_gemm_backend(GemmBackend backend);  // throws when not compiled in
GemmIsa gemm_isa();
void set_gemm_isa(GemmIsa isa);  // throws when the CPU cannot run it

}  // namespace fathom::kernels
