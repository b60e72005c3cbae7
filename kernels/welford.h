#pragma once
// Welford's running mean and sum of squared deviations (m2), the state of the variance
// reduction on both devices: values fold in one at a time, and partial states of different
// chunks merge (Chan et al.'s pairwise update) — so CPU and CUDA give the same f64 result for the
// same chunking. Light header: .cu files include it.

#include <cstdint>

#include "core/dtype.h"  // FATHOM_HOST_DEVICE

namespace fathom::kernels {

// An aggregate without member initializers, so that CUDA kernels can keep it in shared memory;
// `Welford{}` is the empty state.
struct Welford {
  int64_t n;
  double mean, m2;

  FATHOM_HOST_DEVICE void add(double x) {
    ++n;
    const double delta = x - mean;
    mean += delta / static_cast<double>(n);
    m2 += delta * (x - mean);
  }

  FATHOM_HOST_DEVICE void merge(const Welford& right) {
    if (right.n == 0) return;
    if (n == 0) {
      *this = right;
      return;
    }
    const double total = static_cast<double>(n + right.n);
    const double delta = right.mean - mean;
    mean += delta * static_cast<double>(right.n) / total;
    m2 += right.m2 + delta * delta * static_cast<double>(n) * static_cast<double>(right.n) / total;
    n += right.n;
  }

  // m2 / (n - correction), NaN when that has no positive degrees of freedom.
  FATHOM_HOST_DEVICE double variance(int64_t correction, double nan) const {
    const double dof = static_cast<double>(n - correction);
    return dof > 0 ? m2 / dof : nan;
  }
};

}  // namespace fathom::kernels
