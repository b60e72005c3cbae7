// Which GEMM implementation runs: the build's default backend (FATHOM_GEMM_DEFAULT_BACKEND, from
// the FATHOM_CPU_GEMM option) and the best instruction-set flavour this CPU supports, both
// switchable at run time for tests and the benchmark.
#include <atomic>

#include "core/error.h"
#include "kernels/cpu/gemm_backend.h"
#include "kernels/cpu/gemm_kernels.h"

#ifndef FATHOM_GEMM_DEFAULT_BACKEND
#define FATHOM_GEMM_DEFAULT_BACKEND Own
#endif

namespace fathom::kernels {
namespace {

bool cpu_has(GemmIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (isa) {
    case GemmIsa::Portable: return true;
    // __builtin_cpu_supports also checks that the OS saves the wider registers.
    case GemmIsa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case GemmIsa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
    case GemmIsa::Amx: return cpu_has(GemmIsa::Avx512) && gemm_detail::amx_bf16_usable();
  }
  return false;
#else
  return isa == GemmIsa::Portable;
#endif
}

GemmIsa best_isa() {
  if (cpu_has(GemmIsa::Amx)) return GemmIsa::Amx;
  if (cpu_has(GemmIsa::Avx512)) return GemmIsa::Avx512;
  if (cpu_has(GemmIsa::Avx2)) return GemmIsa::Avx2;
  return GemmIsa::Portable;
}

std::atomic<GemmBackend>& backend_state() {
  static std::atomic<GemmBackend> backend{GemmBackend::FATHOM_GEMM_DEFAULT_BACKEND};
  return backend;
}

std::atomic<GemmIsa>& isa_state() {
  static std::atomic<GemmIsa> isa{best_isa()};
  return isa;
}

}  // namespace

const char* gemm_backend_name(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::Own: return "own";
    case GemmBackend::Eigen: return "eigen";
    case GemmBackend::OpenBlas: return "openblas";
  }
  return "?";
}

const char* gemm_isa_name(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::Portable: return "portable";
    case GemmIsa::Avx2: return "avx2";
    case GemmIsa::Avx512: return "avx512";
    case GemmIsa::Amx: return "amx";
  }
  return "?";
}

bool gemm_backend_available(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::Own: return true;
#if FATHOM_GEMM_WITH_EIGEN
    case GemmBackend::Eigen: return true;
#endif
#if FATHOM_GEMM_WITH_OPENBLAS
    case GemmBackend::OpenBlas: return true;
#endif
    default: return false;
  }
}

bool gemm_isa_supported(GemmIsa isa) { return cpu_has(isa); }

bool gemm_has_bf16_dot() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = cpu_has(GemmIsa::Avx512) && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

GemmBackend gemm_backend() { return backend_state().load(std::memory_order_relaxed); }

void set_gemm_backend(GemmBackend backend) {
  FATHOM_CHECK(gemm_backend_available(backend), "set_gemm_backend: the ", gemm_backend_name(backend),
               " GEMM backend is not compiled into this build (FATHOM_CPU_GEMM)");
  backend_state().store(backend, std::memory_order_relaxed);
}

GemmIsa gemm_isa() { return isa_state().load(std::memory_order_relaxed); }

void set_gemm_isa(GemmIsa isa) {
  FATHOM_CHECK(cpu_has(isa), "set_gemm_isa: this CPU cannot run the ", gemm_isa_name(isa), " GEMM kernels");
  isa_state().store(isa, std::memory_order_relaxed);
}

}  // namespace fathom::kernels
