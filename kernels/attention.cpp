#include "kernels/attention.h"

#include <cmath>

#include "core/cuda/cuda_runtime.h"
#include "kernels/launch_geometry.h"
#include "kernels/nn_kernels.h"
#include "kernels/nn_op_checks.h"

namespace fathom {
namespace {
using namespace nn_checks;

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options, const char* op) {
  require_floating(q, op, "q");
  FATHOM_CHECK(q.dim() == 4, op, ": q must be (B, NH, Tq, HS), got shape ", shape_str(q.sizes()));
  for (const auto& [t, name] : {std::pair{&k, "k"}, std::pair{&v, "v"}}) {
    require_defined(*t, op, name);
    FATHOM_CHECK(t->dim() == 4 && t->size(0) == q.size(0) && t->size(3) == q.size(3), op, ": ", name, " of shape ",
                 shape_str(t->sizes()), " must be (B, NKV, Tk, HS) with q's B and HS, q being ", shape_str(q.sizes()));
    require_dtype(*t, q.dtype(), op, name, q);
    check_same_device(*t, q, op);
  }
  FATHOM_CHECK(v.sizes() == k.sizes(), op, ": v of shape ", shape_str(v.sizes()), " must match k of shape ",
               shape_str(k.sizes()));
  const int64_t NH = q.size(1), NKV = k.size(1), Tq = q.size(2), Tk = k.size(2);
  FATHOM_CHECK(NKV > 0 && NH % NKV == 0, op, ": q's ", NH, " heads must be a multiple of k's and v's ", NKV,
               " heads (grouped-query attention shares each kv head among NH / NKV query heads)");
  FATHOM_CHECK(Tq <= Tk, op, ": q has ", Tq, " positions, more than k's ", Tk,
               " (queries are the last Tq of the Tk key positions)");
  FATHOM_CHECK(options.window >= 0, op, ": window must be >= 0 (0: no sliding window), got ", options.window);
  const Tensor& mask = options.key_padding_mask;
  if (!mask.defined()) return;
  FATHOM_CHECK(mask.dtype() == DType::Bool || mask.dtype() == DType::I32 || mask.dtype() == DType::I64, op,
               ": key_padding_mask must be bool, i32 or i64 (1 = a real key, 0 = padding), got ", mask.str());
  FATHOM_CHECK(mask.sizes() == Shape({q.size(0), Tk}), op, ": key_padding_mask must be (B, Tk) = [", q.size(0), ", ",
               Tk, "], got shape ", shape_str(mask.sizes()));
  check_same_device(mask, q, op);
}

double resolve_scale(std::optional<double> scale, const Tensor& q, const char* op) {
  if (!scale) return 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(q.size(3), 1)));
  FATHOM_CHECK(std::isfinite(*scale), op, ": scale must be finite, got ", *scale);
  return *scale;
}

Shape lse_shape(const Tensor& q) { return {q.size(0), q.size(1), q.size(2)}; }

// The kernels' view of the problem; `keep` must outlive the kernel call.
kernels::AttentionShape shape_of(const Tensor& q, const Tensor& k, double scale, const AttentionOptions& options,
                                 const Tensor& keep) {
  return {q.size(0), q.size(1), k.size(1),    q.size(2), k.size(2), q.size(3),
          scale,     options.window, keep.defined() ? static_cast<const bool*>(keep.raw_data()) : nullptr};
}

Tensor keep_mask(const AttentionOptions& options) {
  const Tensor& mask = options.key_padding_mask;
  return mask.defined() ? mask.to(DType::Bool).contiguous() : Tensor();
}

#if FATHOM_WITH_CUDA
// The CUDA kernels keep a head's rows in registers and shared memory sized for HS <= 128.
void check_cuda_head_size(const Tensor& q, const char* op) {
  FATHOM_CHECK(launch::attention_head_tier(q.size(3)) != 0, op, ": head size ", q.size(3),
               " is above the CUDA kernel's limit of ", launch::kAttnMaxHeadSize, " (q of shape ",
               shape_str(q.sizes()), ")");
}
#endif

}  // namespace

AttentionOutputs causal_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const AttentionOptions& options) {
  const char* op = "causal_attention";
  check_qkv(q_in, k_in, v_in, options, op);
  const double s = resolve_scale(options.scale, q_in, op);
  const Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), keep = keep_mask(options);
  const kernels::AttentionShape shape = shape_of(q, k, s, options, keep);
  AttentionOutputs result{Tensor::empty(q.sizes(), q.dtype(), q.device()),
                          Tensor::empty(lse_shape(q), stats_dtype(q.dtype()), q.device())};
  switch (q.device().type) {
    case DeviceType::CPU:
      kernels::attention_forward_cpu(q.dtype(), result.out.raw_data(), result.lse.raw_data(), q.raw_data(),
                                     k.raw_data(), v.raw_data(), shape);
      break;
    case DeviceType::CUDA:
#if FATHOM_WITH_CUDA
      check_cuda_head_size(q, op);
      kernels::attention_forward_cuda(q.dtype(), result.out.raw_data(), result.lse.raw_data(), q.raw_data(),
                                      k.raw_data(), v.raw_data(), shape, cuda::current_stream());
      break;
#else
      fail_on_cuda(op, q);
#endif
  }
  return result;
}

AttentionGrads causal_attention_backward(const Tensor& dout_in, const Tensor& q_in, const Tensor& k_in,
                                         const Tensor& v_in, const Tensor& out_in, const Tensor& lse_in,
                                         const AttentionOptions& options, const Tensor& dlse_in, bool need_dq,
                                         bool need_dk, bool need_dv) {
  const char* op = "causal_attention_backward";
  check_qkv(q_in, k_in, v_in, options, op);
  for (const auto& [t, name] : {std::pair{&dout_in, "dout"}, std::pair{&out_in, "out"}}) {
    require_defined(*t, op, name);
    FATHOM_CHECK(t->sizes() == q_in.sizes(), op, ": ", name, " of shape ", shape_str(t->sizes()),
                 " must match q of shape ", shape_str(q_in.sizes()));
    require_dtype(*t, q_in.dtype(), op, name, q_in);
    check_same_device(*t, q_in, op);
  }
  const DType stats = stats_dtype(q_in.dtype());
  for (const auto& [t, name] : {std::pair{&lse_in, "lse"}, std::pair{&dlse_in, "dlse"}}) {
    if (!t->defined() && t == &dlse_in) continue;
    require_defined(*t, op, name);
    FATHOM_CHECK(t->sizes() == lse_shape(q_in) && t->dtype() == stats, op, ": ", name, " must be a ", dtype_name(stats),
                 " tensor of shape ", shape_str(lse_shape(q_in)), " (B, NH, Tq), got ", t->str());
    check_same_device(*t, q_in, op);
  }
  const double s = resolve_scale(options.scale, q_in, op);
  const Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), keep = keep_mask(options);
  const Tensor dout = dout_in.contiguous(), out = out_in.contiguous(), lse = lse_in.contiguous();
  const Tensor dlse = dlse_in.defined() ? dlse_in.contiguous() : dlse_in;
  const kernels::AttentionShape shape = shape_of(q, k, s, options, keep);
  AttentionGrads grads;
  if (need_dq) grads.dq = Tensor::empty(q.sizes(), q.dtype(), q.device());
  if (need_dk) grads.dk = Tensor::empty(k.sizes(), k.dtype(), k.device());
  if (need_dv) grads.dv = Tensor::empty(v.sizes(), v.dtype(), v.device());
  auto ptr = [](const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; };
  switch (q.device().type) {
    case DeviceType::CPU:
      kernels::attention_backward_cpu(q.dtype(), ptr(grads.dq), ptr(grads.dk), ptr(grads.dv), dout.raw_data(),
                                      q.raw_data(), k.raw_data(), v.raw_data(), out.raw_data(), lse.raw_data(),
                                      ptr(dlse), shape, /*accumulate=*/false);
      break;
    case DeviceType::CUDA: {
#if FATHOM_WITH_CUDA
      check_cuda_head_size(q, op);
      const Tensor row_terms = Tensor::empty(lse_shape(q), stats, q.device());
      kernels::attention_backward_cuda(q.dtype(), ptr(grads.dq), ptr(grads.dk), ptr(grads.dv), dout.raw_data(),
                                       q.raw_data(), k.raw_data(), v.raw_data(), out.raw_data(), lse.raw_data(),
                                       ptr(dlse), shape, /*accumulate=*/false, row_terms.raw_data(),
                                       cuda::current_stream());
      break;
#else
      fail_on_cuda(op, q);
#endif
    }
  }
  return grads;
}

}  // namespace fathom
