#pragma once
// Argument checks and device dispatch shared by the tensor-level NN ops (softmax.cpp,
// normalization.cpp, embedding.cpp, cross_entropy.cpp, dropout.cpp, attention.cpp), so their
// messages read the same way: "<op>: <what> ... <fix>".

#include "core/cuda/cuda_runtime.h"
#include "core/tensor.h"

namespace fathom::nn_checks {

inline void require_defined(const Tensor& t, const char* op, const char* name) {
  FATHOM_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
}

// f32, f64, f16 or bf16: the activation dtypes the NN kernels are built for.
inline void require_floating(const Tensor& t, const char* op, const char* name) {
  require_defined(t, op, name);
  FATHOM_CHECK(is_floating_point(t.dtype()), op, ": ", name,
               " must be a floating-point tensor (f32, f64, f16, bf16), got ", dtype_name(t.dtype()), " of shape ",
               shape_str(t.sizes()));
}

inline void require_dtype(const Tensor& t, DType dtype, const char* op, const char* name, const Tensor& like) {
  FATHOM_CHECK(t.dtype() == dtype, op, ": ", name, " must have the dtype of ", like.str(), ", got ", t.str(),
               " (convert it with .to(", dtype_name(dtype), "))");
}

// Saved statistics (mean, rstd, logsumexp) and losses live in the compute type.
inline DType stats_dtype(DType dtype) { return dtype == DType::F64 ? DType::F64 : DType::F32; }

// The NN ops have CPU kernels only for now; CUDA tensors get a clear error instead of a crash.
[[noreturn]] inline void fail_on_cuda(const char* op, const Tensor& t) {
#if !FATHOM_WITH_CUDA
  cuda::require_device(t.device().index);  // throws: this build has no CUDA backend
#endif
  FATHOM_FAIL(op, " on CUDA arrives with the CUDA kernels issue; got ", t.str(),
              " (run it on CPU tensors for now: .to(kCPU))");
}

}  // namespace fathom::nn_checks
