// CPU twins of the elementwise kernels.
//
// Layout: a dense fast path (every operand contiguous, no broadcasting) runs one flat loop per
// thread chunk; anything else walks the strided layout (core/strided_loop.h). Both split work
// by element ranges only, so every output element is computed by the same code whatever the
// thread count. Precision: f16/bf16 are loaded into f32, computed, rounded once on store.
// The loops are compiled for AVX-512, AVX2 and baseline x86-64 (target_clones) and chosen
// when the library loads, so one binary vectorises wherever it runs.
#include <algorithm>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "core/error.h"
#include "core/strided_loop.h"
#include "kernels/elementwise_kernels.h"
#include "kernels/elementwise_math.h"

namespace fathom::kernels {
namespace {

#define FATHOM_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float,
                                   std::conditional_t<std::is_same_v<T, bool>, int32_t, T>>;

constexpr int64_t kParallelGrain = 32768;

// Runs body(begin, end) over [0, n) split into per-thread chunks.
template <typename Body>
void parallel_chunks(int64_t n, Body&& body) {
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), (n + kParallelGrain - 1) / kParallelGrain));
  if (threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) body(n * t / threads, n * (t + 1) / threads);
}

std::array<Strides, kMaxElementwiseOperands> strides_of(const ElementwiseLayout& layout) {
  std::array<Strides, kMaxElementwiseOperands> out;
  for (int k = 0; k < kMaxElementwiseOperands; ++k) out[k].assign(layout.strides[k], layout.strides[k] + layout.ndim);
  return out;
}

template <UnaryOp kOp, typename T>
FATHOM_VECTOR_CLONES void unary_dense(T* __restrict out, const T* __restrict x, int64_t n, Compute<T> alpha,
                                      Compute<T> beta, bool accumulate) {
  using C = Compute<T>;
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) out[i] = T(C(out[i]) + math::unary<C>(kOp, C(x[i]), alpha, beta));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = T(math::unary<C>(kOp, C(x[i]), alpha, beta));
  }
}

template <UnaryOp kOp, typename T>
void unary_typed(T* out, const T* x, const ElementwiseLayout& layout, double alpha, double beta, bool accumulate) {
  using C = Compute<T>;
  const C a = static_cast<C>(alpha), b = static_cast<C>(beta);
  if (layout.contiguous) {
    parallel_chunks(layout.numel, [&](int64_t begin, int64_t end) {
      unary_dense<kOp, T>(out + begin, x + begin, end - begin, a, b, accumulate);
    });
    return;
  }
  const auto strides = strides_of(layout);
  const Shape sizes(layout.sizes, layout.sizes + layout.ndim);
  for_each_strided<2>(sizes, {&strides[0], &strides[1]},
                      [&](const std::array<int64_t, 2>& at, int64_t n, const std::array<int64_t, 2>& step) {
                        for (int64_t j = 0; j < n; ++j) {
                          T& dst = out[at[0] + j * step[0]];
                          C value = math::unary<C>(kOp, C(x[at[1] + j * step[1]]), a, b);
                          if (accumulate) value += C(dst);
                          dst = T(value);
                        }
                      });
}

template <BinaryOp kOp, typename T, typename Out>
FATHOM_VECTOR_CLONES void binary_dense(Out* __restrict out, const T* __restrict a, const T* __restrict b, int64_t n,
                                       bool accumulate) {
  using C = Compute<T>;
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) out[i] = Out(Compute<Out>(out[i]) + math::binary<C>(kOp, C(a[i]), C(b[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Out(math::binary<C>(kOp, C(a[i]), C(b[i])));
  }
}

template <BinaryOp kOp, typename T>
void binary_typed(void* out_ptr, const T* a, const T* b, const ElementwiseLayout& layout, bool accumulate) {
  using C = Compute<T>;
  using Out = std::conditional_t<is_comparison(kOp), bool, T>;
  Out* out = static_cast<Out*>(out_ptr);
  if (layout.contiguous) {
    parallel_chunks(layout.numel, [&](int64_t begin, int64_t end) {
      binary_dense<kOp, T, Out>(out + begin, a + begin, b + begin, end - begin, accumulate);
    });
    return;
  }
  const auto strides = strides_of(layout);
  const Shape sizes(layout.sizes, layout.sizes + layout.ndim);
  for_each_strided<3>(sizes, {&strides[0], &strides[1], &strides[2]},
                      [&](const std::array<int64_t, 3>& at, int64_t n, const std::array<int64_t, 3>& step) {
                        for (int64_t j = 0; j < n; ++j) {
                          Out& dst = out[at[0] + j * step[0]];
                          auto value = math::binary<C>(kOp, C(a[at[1] + j * step[1]]), C(b[at[2] + j * step[2]]));
                          if (accumulate) value += Compute<Out>(dst);
                          dst = Out(value);
                        }
                      });
}

// Calls fn.template operator()<T>() for the dtypes an op supports.
template <typename Fn>
void dispatch_numeric(DType dtype, bool float_only, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn.template operator()<float>();
    case DType::F64: return fn.template operator()<double>();
    case DType::F16: return fn.template operator()<Half>();
    case DType::BF16: return fn.template operator()<BFloat16>();
    case DType::I32:
      if (!float_only) return fn.template operator()<int32_t>();
      break;
    case DType::I64:
      if (!float_only) return fn.template operator()<int64_t>();
      break;
    case DType::Bool: break;
  }
  FATHOM_FAIL(op, ": dtype ", dtype_name(dtype), " is not supported by this kernel");
}

template <UnaryOp kOp>
void unary_op(DType dtype, void* out, const void* x, const ElementwiseLayout& layout, double alpha, double beta,
              bool accumulate) {
  dispatch_numeric(dtype, math::is_float_only(kOp), "unary", [&]<typename T>() {
    if constexpr (std::is_floating_point_v<Compute<T>> || !math::is_float_only(kOp))
      unary_typed<kOp, T>(static_cast<T*>(out), static_cast<const T*>(x), layout, alpha, beta, accumulate);
  });
}

template <BinaryOp kOp>
void binary_op(DType dtype, void* out, const void* a, const void* b, const ElementwiseLayout& layout,
               bool accumulate) {
  dispatch_numeric(dtype, math::is_float_only(kOp), "binary", [&]<typename T>() {
    if constexpr (std::is_floating_point_v<Compute<T>> || !math::is_float_only(kOp))
      binary_typed<kOp, T>(out, static_cast<const T*>(a), static_cast<const T*>(b), layout, accumulate);
  });
}

}  // namespace

void unary_forward_cpu(UnaryOp op, DType dtype, void* out, const void* x, const ElementwiseLayout& layout,
                       double alpha, double beta, bool accumulate) {
  switch (op) {
#define FATHOM_UNARY_CASE(name) \
  case UnaryOp::name: return unary_op<UnaryOp::name>(dtype, out, x, layout, alpha, beta, accumulate);
    FATHOM_UNARY_CASE(Neg) FATHOM_UNARY_CASE(Abs) FATHOM_UNARY_CASE(Exp) FATHOM_UNARY_CASE(Log)
    FATHOM_UNARY_CASE(Sqrt) FATHOM_UNARY_CASE(Rsqrt) FATHOM_UNARY_CASE(Tanh) FATHOM_UNARY_CASE(Sigmoid)
    FATHOM_UNARY_CASE(Relu) FATHOM_UNARY_CASE(GeluTanh) FATHOM_UNARY_CASE(GeluErf) FATHOM_UNARY_CASE(Silu)
    FATHOM_UNARY_CASE(AddScalar) FATHOM_UNARY_CASE(MulScalar) FATHOM_UNARY_CASE(DivScalar)
    FATHOM_UNARY_CASE(RsubScalar) FATHOM_UNARY_CASE(PowScalar) FATHOM_UNARY_CASE(Clamp)
#undef FATHOM_UNARY_CASE
  }
}

void binary_forward_cpu(BinaryOp op, DType dtype, void* out, const void* a, const void* b,
                        const ElementwiseLayout& layout, bool accumulate) {
  switch (op) {
#define FATHOM_BINARY_CASE(name) \
  case BinaryOp::name: return binary_op<BinaryOp::name>(dtype, out, a, b, layout, accumulate);
    FATHOM_BINARY_CASE(Add) FATHOM_BINARY_CASE(Sub) FATHOM_BINARY_CASE(Mul) FATHOM_BINARY_CASE(Div)
    FATHOM_BINARY_CASE(Pow) FATHOM_BINARY_CASE(Maximum) FATHOM_BINARY_CASE(Minimum) FATHOM_BINARY_CASE(Eq)
    FATHOM_BINARY_CASE(Ne) FATHOM_BINARY_CASE(Lt) FATHOM_BINARY_CASE(Le) FATHOM_BINARY_CASE(Gt)
    FATHOM_BINARY_CASE(Ge) FATHOM_BINARY_CASE(ReluBackward) FATHOM_BINARY_CASE(GeluTanhBackward)
    FATHOM_BINARY_CASE(GeluErfBackward) FATHOM_BINARY_CASE(SiluBackward) FATHOM_BINARY_CASE(SigmoidBackward)
    FATHOM_BINARY_CASE(TanhBackward) FATHOM_BINARY_CASE(SwiGlu)
#undef FATHOM_BINARY_CASE
  }
}

void where_forward_cpu(DType dtype, void* out, const bool* cond, const void* a, const void* b,
                       const ElementwiseLayout& layout) {
  const auto strides = strides_of(layout);
  const Shape sizes(layout.sizes, layout.sizes + layout.ndim);
  dispatch_dtype(dtype, "where", [&]<typename T>() {
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    for_each_strided<4>(sizes, {&strides[0], &strides[1], &strides[2], &strides[3]},
                        [&](const std::array<int64_t, 4>& at, int64_t n, const std::array<int64_t, 4>& step) {
                          for (int64_t j = 0; j < n; ++j)
                            o[at[0] + j * step[0]] =
                                cond[at[1] + j * step[1]] ? x[at[2] + j * step[2]] : y[at[3] + j * step[3]];
                        });
  });
}

}  // namespace fathom::kernels
