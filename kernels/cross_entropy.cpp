#include "kernels/cross_entropy.h"

#include <cmath>

#include "core/cuda/cuda_runtime.h"
#include "kernels/nn_kernels.h"
#include "kernels/nn_op_checks.h"

namespace fathom {
namespace {
using namespace nn_checks;

#if FATHOM_WITH_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

Shape row_shape(const Tensor& logits) { return Shape(logits.sizes().begin(), logits.sizes().end() - 1); }

void check_logits_and_targets(const Tensor& logits, const Tensor& targets, const char* op) {
  require_floating(logits, op, "logits");
  FATHOM_CHECK(logits.dim() >= 1, op, ": logits must be (..., V) with classes in the last dim, got shape ",
               shape_str(logits.sizes()));
  require_defined(targets, op, "targets");
  FATHOM_CHECK(targets.dtype() == DType::I64, op, ": targets must be i64 class indices, got ",
               dtype_name(targets.dtype()), " (convert them with .to(i64))");
  FATHOM_CHECK(targets.sizes() == row_shape(logits), op, ": targets of shape ", shape_str(targets.sizes()),
               " must be logits' shape without the class dim, ", shape_str(row_shape(logits)), " (logits are ",
               shape_str(logits.sizes()), ")");
  check_same_device(targets, logits, op);
}

// Checks every target (naming the row, the value and V) and returns the default normaliser:
// the number of non-ignored targets, or 1 when there are none (so the loss is 0, not 0/0).
// Device targets are copied to the host for this (N int64s, small beside the N x V logits): the
// CUDA kernels then trust them, and errors and the normaliser are the CPU's.
double check_targets(const Tensor& targets, int64_t V, int64_t ignore_index, const char* op) {
  const std::vector<int64_t> values = targets.to_vector<int64_t>();
  int64_t counted = 0;
  for (size_t row = 0; row < values.size(); ++row) {
    const int64_t t = values[row];
    if (t == ignore_index) continue;
    FATHOM_CHECK(t >= 0 && t < V, op, ": target ", t, " in row ", row, " is out of range for V = ", V,
                 " classes (valid: 0 to ", V - 1, ", or ignore_index = ", ignore_index, ")");
    ++counted;
  }
  return counted > 0 ? static_cast<double>(counted) : 1.0;
}

double resolve_normaliser(std::optional<double> normaliser, double counted, const char* op) {
  if (!normaliser) return counted;
  FATHOM_CHECK(std::isfinite(*normaliser) && *normaliser > 0, op, ": normaliser must be a positive number, got ",
               *normaliser, " (pass the number of targets the loss is averaged over, or leave it unset for the mean)");
  return *normaliser;
}

}  // namespace

CrossEntropyOutputs cross_entropy(const Tensor& logits_in, const Tensor& targets_in, std::optional<double> normaliser,
                                  int64_t ignore_index) {
  const char* op = "cross_entropy";
  check_logits_and_targets(logits_in, targets_in, op);
  const int64_t V = logits_in.size(-1);
  const double norm = resolve_normaliser(normaliser, check_targets(targets_in, V, ignore_index, op), op);
  const Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  CrossEntropyOutputs result{Tensor::empty({}, stats_dtype(logits.dtype()), logits.device()),
                             Tensor::empty(row_shape(logits), stats_dtype(logits.dtype()), logits.device())};
  switch (logits.device().type) {
    case DeviceType::CPU:
      kernels::cross_entropy_forward_cpu(logits.dtype(), result.loss.raw_data(), result.lse.raw_data(),
                                         logits.raw_data(), targets.data<int64_t>(), targets.numel(), V, ignore_index,
                                         norm);
      break;
    case DeviceType::CUDA:
      if constexpr (kCudaBuilt) {
        const Tensor row_losses = Tensor::empty({targets.numel()}, DType::F64, logits.device());
        kernels::cross_entropy_forward_cuda(logits.dtype(), result.loss.raw_data(), result.lse.raw_data(),
                                            logits.raw_data(), targets.data<int64_t>(), targets.numel(), V,
                                            ignore_index, norm, row_losses.data<double>(), cuda::current_stream());
      } else {
        fail_on_cuda(op, logits);
      }
  }
  return result;
}

void cross_entropy_backward_into(const Tensor& dlogits, const Tensor& dloss_in, const Tensor& logits_in,
                                 const Tensor& targets_in, const Tensor& lse_in, std::optional<double> normaliser,
                                 int64_t ignore_index, const Tensor& dlse_in, bool accumulate) {
  const char* op = "cross_entropy_backward";
  check_logits_and_targets(logits_in, targets_in, op);
  const DType stats = stats_dtype(logits_in.dtype());
  require_defined(dlogits, op, "dlogits");
  FATHOM_CHECK(dlogits.sizes() == logits_in.sizes() && dlogits.dtype() == logits_in.dtype() && dlogits.is_contiguous(),
               op, ": dlogits must be a contiguous tensor shaped and typed like logits ", logits_in.str(), ", got ",
               dlogits.str());
  require_defined(dloss_in, op, "dloss");
  FATHOM_CHECK(dloss_in.numel() == 1 && dloss_in.dtype() == stats, op, ": dloss must be a single ", dtype_name(stats),
               " value (the loss's gradient), got ", dloss_in.str());
  require_defined(lse_in, op, "lse");
  FATHOM_CHECK(lse_in.sizes() == row_shape(logits_in) && lse_in.dtype() == stats, op, ": lse must be the forward's ",
               dtype_name(stats), " logsumexp of shape ", shape_str(row_shape(logits_in)), ", got ", lse_in.str());
  if (dlse_in.defined())
    FATHOM_CHECK(dlse_in.sizes() == lse_in.sizes() && dlse_in.dtype() == stats, op, ": dlse must match lse ",
                 lse_in.str(), ", got ", dlse_in.str());
  for (const Tensor* t : {&dlogits, &dloss_in, &lse_in}) check_same_device(*t, logits_in, op);
  if (dlse_in.defined()) check_same_device(dlse_in, logits_in, op);
  const int64_t V = logits_in.size(-1);
  const double norm = resolve_normaliser(normaliser, check_targets(targets_in, V, ignore_index, op), op);
  const Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous(), lse = lse_in.contiguous();
  const Tensor dloss = dloss_in.contiguous(), dlse = dlse_in.defined() ? dlse_in.contiguous() : dlse_in;
  switch (logits.device().type) {
    case DeviceType::CPU:
      kernels::cross_entropy_backward_cpu(logits.dtype(), dlogits.raw_data(), dloss.raw_data(), logits.raw_data(),
                                          targets.data<int64_t>(), lse.raw_data(),
                                          dlse.defined() ? dlse.raw_data() : nullptr, targets.numel(), V, ignore_index,
                                          norm, accumulate);
      break;
    case DeviceType::CUDA:
      if constexpr (kCudaBuilt) {
        kernels::cross_entropy_backward_cuda(logits.dtype(), dlogits.raw_data(), dloss.raw_data(), logits.raw_data(),
                                             targets.data<int64_t>(), lse.raw_data(),
                                             dlse.defined() ? dlse.raw_data() : nullptr, targets.numel(), V,
                                             ignore_index, norm, accumulate, cuda::current_stream());
      } else {
        fail_on_cuda(op, logits);
      }
  }
  dlogits.bump_version();
}

Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                              std::optional<double> normaliser, int64_t ignore_index, const Tensor& dlse) {
  require_floating(logits, "cross_entropy_backward", "logits");
  Tensor dlogits = Tensor::empty(logits.sizes(), logits.dtype(), logits.device());
  cross_entropy_backward_into(dlogits, dloss, logits, targets, lse, normaliser, ignore_index, dlse, false);
  return dlogits;
}

}  // namespace fathom
