#pragma once
// The CUDA device math the kernels call, as host functions for the SIMT emulator: the C math
// library in the global namespace (sqrtf, logf, isfinite, ...) and the intrinsics with a defined
// rounding or a reinterpretation. Host arithmetic rounds to nearest like CUDA's *_rn forms; the
// host compiler may contract a product into a following add where nvcc's __fmul_rn would not, so
// emulated results match the GPU within the usual last-ulp differences, as the CPU twins do.
#include <math.h>

#include <bit>
#include <cstdint>

inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
