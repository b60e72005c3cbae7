// CPU twins of the fused optimizer kernels: one pass over params, grads and states, split
// into per-thread element ranges (elementwise, so the thread count never changes results),
// compiled for AVX-512, AVX2 and baseline x86-64 and chosen at load time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/optimizer_kernels.h"

namespace fathom::kernels {
namespace {

#define FATHOM_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

constexpr int64_t kGrain = 16384;

template <typename Body>
void parallel_ranges(int64_t n, Body&& body) {
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), (n + kGrain - 1) / kGrain));
  if (threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) body(n * t / threads, n * (t + 1) / threads);
}

// value rounded into the copy's dtype, as Copy(value) rounds it. bf16 copies are stored as their
// bits (uint16_t) and rounded without branches (a select for NaN): through BFloat16's constructor,
// whose early return for NaN kept the loop scalar, the update with a bf16 copy ran 4x slower.
inline uint16_t bfloat16_bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  // The select is on 32-bit values and tests NaN as a float: GCC 12 vectorises neither a select
  // of 16-bit values nor an unsigned compare of the bits here. A NaN is quietened, keeping its sign
  // and top payload bits; anything else rounds to nearest even.
  const uint32_t rounded = value != value ? (x | 0x400000u) : x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

template <typename Copy>
inline Copy rounded_copy(float value) {
  if constexpr (std::is_same_v<Copy, uint16_t>) return bfloat16_bits(value);
  else return Copy(value);
}

template <typename Copy>
FATHOM_VECTOR_CLONES void adam_range(float* __restrict p, const float* __restrict g, float* __restrict m,
                                     float* __restrict v, Copy* __restrict copy, int64_t n, float lr, float beta1,
                                     float beta2, float eps, float decay, float bc1, float bc2, bool adam_w) {
  for (int64_t i = 0; i < n; ++i) {
    float grad = g[i];
    if (!adam_w) grad += decay * p[i];  // L2: weight decay joins the gradient
    const float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    const float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi / bc2) + eps;
    float update = (mi / bc1) / denom;
    if (adam_w) update += decay * p[i];  // AdamW: decoupled weight decay
    const float next = p[i] - lr * update;
    p[i] = next;
    if constexpr (!std::is_same_v<Copy, void>) copy[i] = rounded_copy<Copy>(next);
  }
}

template <typename Copy>
FATHOM_VECTOR_CLONES void sgd_range(float* __restrict p, const float* __restrict g, float* __restrict buf,
                                    Copy* __restrict copy, int64_t n, float lr, float momentum, float dampening,
                                    float decay, bool nesterov, bool first_step) {
  for (int64_t i = 0; i < n; ++i) {
    float grad = g[i] + decay * p[i];
    if (momentum != 0.0f) {
      const float b = first_step ? grad : momentum * buf[i] + (1.0f - dampening) * grad;
      buf[i] = b;
      grad = nesterov ? grad + momentum * b : b;
    }
    const float next = p[i] - lr * grad;
    p[i] = next;
    if constexpr (!std::is_same_v<Copy, void>) copy[i] = rounded_copy<Copy>(next);
  }
}

template <typename Copy>
FATHOM_VECTOR_CLONES void scale_range(float* __restrict p, Copy* __restrict copy, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) {
    const float next = p[i] * factor;
    p[i] = next;
    if constexpr (!std::is_same_v<Copy, void>) copy[i] = rounded_copy<Copy>(next);
  }
}

// Calls fn(typed_copy_pointer) with the copy's type (void* when there is no copy).
template <typename Fn>
void with_copy_type(DType copy_dtype, void* copy, Fn&& fn) {
  if (copy == nullptr) return fn(static_cast<void*>(nullptr));
  switch (copy_dtype) {
    case DType::BF16: return fn(static_cast<uint16_t*>(copy));  // the bits: rounded_copy<uint16_t>
    case DType::F16: return fn(static_cast<Half*>(copy));
    case DType::F32: return fn(static_cast<float*>(copy));
    default: FATHOM_FAIL("optimizer: parameter copies must be bf16, f16 or f32, got ", dtype_name(copy_dtype));
  }
}

// The copy pointer advanced to `begin` (no copy: stays null).
template <typename Copy>
Copy* advance(Copy* copy, int64_t begin) {
  if constexpr (std::is_same_v<Copy, void>) return nullptr;
  else return copy == nullptr ? nullptr : copy + begin;
}

template <typename T>
FATHOM_VECTOR_CLONES bool any_non_finite(const T* __restrict x, int64_t n) {
  using Value = std::conditional_t<std::is_same_v<T, double>, double, float>;
  // Counting instead of returning early keeps the loop branch-free and vectorised.
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Value v = static_cast<Value>(x[i]);
    bad += (v - v) != Value(0) || v != v;  // Inf - Inf and NaN - NaN are NaN
  }
  return bad != 0;
}

}  // namespace

void adam_step_cpu(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, int64_t n,
                   const AdamHyper& h, DType copy_dtype, void* param_copy) {
  const float bc1 = h.bias_correction ? static_cast<float>(1.0 - std::pow(h.beta1, static_cast<double>(h.step))) : 1.0f;
  const float bc2 = h.bias_correction ? static_cast<float>(1.0 - std::pow(h.beta2, static_cast<double>(h.step))) : 1.0f;
  with_copy_type(copy_dtype, param_copy, [&](auto* copy) {
    using Copy = std::remove_pointer_t<decltype(copy)>;
    parallel_ranges(n, [&](int64_t begin, int64_t end) {
      adam_range<Copy>(params + begin, grads + begin, exp_avg + begin, exp_avg_sq + begin,
                       advance(copy, begin), end - begin, static_cast<float>(h.lr),
                       static_cast<float>(h.beta1), static_cast<float>(h.beta2), static_cast<float>(h.eps),
                       static_cast<float>(h.weight_decay), bc1, bc2, h.adam_w_mode);
    });
  });
}

void sgd_step_cpu(float* params, const float* grads, float* momentum_buffer, int64_t n, const SgdHyper& h,
                  DType copy_dtype, void* param_copy) {
  with_copy_type(copy_dtype, param_copy, [&](auto* copy) {
    using Copy = std::remove_pointer_t<decltype(copy)>;
    parallel_ranges(n, [&](int64_t begin, int64_t end) {
      sgd_range<Copy>(params + begin, grads + begin, momentum_buffer == nullptr ? nullptr : momentum_buffer + begin,
                      advance(copy, begin), end - begin, static_cast<float>(h.lr),
                      static_cast<float>(h.momentum), static_cast<float>(h.dampening),
                      static_cast<float>(h.weight_decay), h.nesterov, h.first_step);
    });
  });
}

void scale_cpu(float* values, int64_t n, float factor, DType copy_dtype, void* copy_data) {
  with_copy_type(copy_dtype, copy_data, [&](auto* copy) {
    using Copy = std::remove_pointer_t<decltype(copy)>;
    parallel_ranges(n, [&](int64_t begin, int64_t end) {
      scale_range<Copy>(values + begin, advance(copy, begin), end - begin, factor);
    });
  });
}

bool has_inf_or_nan_cpu(DType dtype, const void* data, int64_t n) {
  bool found = false;
  auto scan = [&](auto* typed) {
    parallel_ranges(n, [&](int64_t begin, int64_t end) {
      if (any_non_finite(typed + begin, end - begin)) {
#pragma omp atomic write
        found = true;
      }
    });
  };
  switch (dtype) {
    case DType::F32: scan(static_cast<const float*>(data)); break;
    case DType::F64: scan(static_cast<const double*>(data)); break;
    case DType::BF16: scan(static_cast<const BFloat16*>(data)); break;
    case DType::F16: scan(static_cast<const Half*>(data)); break;
    default: FATHOM_FAIL("has_inf_or_nan: needs a floating-point tensor, got ", dtype_name(dtype));
  }
  return found;
}

}  // namespace fathom::kernels
