#include "kernels/normalization.h"

#include <initializer_list>

#include "core/cuda/cuda_runtime.h"
#include "kernels/launch_geometry.h"
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

Shape row_shape(const Tensor& x) { return Shape(x.sizes().begin(), x.sizes().end() - 1); }
int64_t row_count(const Tensor& x) { return shape_numel(row_shape(x)); }
const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

void check_x(const Tensor& x, const char* op) {
  require_floating(x, op, "x");
  FATHOM_CHECK(x.dim() >= 1, op, ": x must have at least one dim (it normalises the last), got shape ",
               shape_str(x.sizes()));
}

// weight / bias: optional, shape [C], x's dtype and device.
void check_affine(const Tensor& p, const Tensor& x, const char* op, const char* name) {
  if (!p.defined()) return;
  FATHOM_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), op, ": ", name, " of shape ", shape_str(p.sizes()),
               " does not match the last dim of x of shape ", shape_str(x.sizes()), "; pass a ", name, " of shape [",
               x.size(-1), "]");
  require_dtype(p, x.dtype(), op, name, x);
  check_same_device(p, x, op);
}

void check_eps(double eps, const char* op) { FATHOM_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps); }

// dy like x; saved statistics shaped like x without its last dim, in the compute dtype.
struct StatArg {
  const Tensor& tensor;
  const char* name;
  bool optional;  // gradients into the statistics may be absent
};

void check_backward_inputs(const Tensor& dy, const Tensor& x, std::initializer_list<StatArg> stats, const char* op) {
  require_defined(dy, op, "dy");
  FATHOM_CHECK(dy.sizes() == x.sizes(), op, ": dy of shape ", shape_str(dy.sizes()), " must match x of shape ",
               shape_str(x.sizes()));
  require_dtype(dy, x.dtype(), op, "dy", x);
  check_same_device(dy, x, op);
  for (const StatArg& stat : stats) {
    if (stat.optional && !stat.tensor.defined()) continue;
    require_defined(stat.tensor, op, stat.name);
    FATHOM_CHECK(stat.tensor.sizes() == row_shape(x), op, ": ", stat.name, " of shape ", shape_str(stat.tensor.sizes()),
                 " must have x's shape without its last dim, ", shape_str(row_shape(x)), " (x is ",
                 shape_str(x.sizes()), ")");
    FATHOM_CHECK(stat.tensor.dtype() == stats_dtype(x.dtype()), op, ": ", stat.name, " must be ",
                 dtype_name(stats_dtype(x.dtype())), " for ", dtype_name(x.dtype()), " x, got ",
                 dtype_name(stat.tensor.dtype()));
    check_same_device(stat.tensor, x, op);
  }
}

Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

// Device workspace for the partial column sums of a wanted dweight/dbias (undefined otherwise).
Tensor column_partials(const Tensor& wanted, const Tensor& x, int64_t N, int64_t C) {
  if (!wanted.defined()) return Tensor();
  return Tensor::empty({launch::plan_column_sums(N, C).row_blocks, C}, stats_dtype(x.dtype()), x.device());
}

}  // namespace

LayerNormOutputs layernorm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, double eps) {
  const char* op = "layernorm";
  check_x(x_in, op);
  check_affine(weight_in, x_in, op, "weight");
  check_affine(bias_in, x_in, op, "bias");
  check_eps(eps, op);
  const Tensor x = x_in.contiguous(), weight = contiguous_or_undefined(weight_in),
               bias = contiguous_or_undefined(bias_in);
  LayerNormOutputs result{Tensor::empty(x.sizes(), x.dtype(), x.device()),
                          Tensor::empty(row_shape(x), stats_dtype(x.dtype()), x.device()),
                          Tensor::empty(row_shape(x), stats_dtype(x.dtype()), x.device())};
  if (x.device().is_cpu()) {
    kernels::layernorm_forward_cpu(x.dtype(), result.y.raw_data(), result.mean.raw_data(), result.rstd.raw_data(),
                                   x.raw_data(), data_or_null(weight), data_or_null(bias), row_count(x), x.size(-1),
                                   eps);
  } else if constexpr (kCudaBuilt) {
    kernels::layernorm_forward_cuda(x.dtype(), result.y.raw_data(), result.mean.raw_data(), result.rstd.raw_data(),
                                    x.raw_data(), data_or_null(weight), data_or_null(bias), row_count(x), x.size(-1),
                                    eps, cuda::current_stream());
  } else {
    fail_on_cuda(op, x);
  }
  return result;
}

LayerNormGrads layernorm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& weight_in,
                                  const Tensor& mean_in, const Tensor& rstd_in, bool need_dx, bool need_dweight,
                                  bool need_dbias, const Tensor& dmean_in, const Tensor& drstd_in) {
  const char* op = "layernorm_backward";
  check_x(x_in, op);
  check_affine(weight_in, x_in, op, "weight");
  check_backward_inputs(
      dy_in, x_in,
      {{mean_in, "mean", false}, {rstd_in, "rstd", false}, {dmean_in, "dmean", true}, {drstd_in, "drstd", true}}, op);
  const Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), weight = contiguous_or_undefined(weight_in);
  const Tensor mean = mean_in.contiguous(), rstd = rstd_in.contiguous();
  const Tensor dmean = contiguous_or_undefined(dmean_in), drstd = contiguous_or_undefined(drstd_in);
  const int64_t C = x.size(-1);
  LayerNormGrads grads;
  if (need_dx) grads.dx = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (need_dweight && weight.defined()) grads.dweight = Tensor::empty({C}, x.dtype(), x.device());
  if (need_dbias) grads.dbias = Tensor::empty({C}, x.dtype(), x.device());
  auto out_ptr = [](const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; };
  if (x.device().is_cpu()) {
    kernels::layernorm_backward_cpu(x.dtype(), out_ptr(grads.dx), out_ptr(grads.dweight), out_ptr(grads.dbias),
                                    dy.raw_data(), x.raw_data(), data_or_null(weight), mean.raw_data(),
                                    rstd.raw_data(), data_or_null(dmean), data_or_null(drstd), row_count(x), C,
                                    /*accumulate=*/false);
  } else if constexpr (kCudaBuilt) {
    const int64_t N = row_count(x);
    const Tensor dw_partials = column_partials(grads.dweight, x, N, C);
    const Tensor db_partials = column_partials(grads.dbias, x, N, C);
    kernels::layernorm_backward_cuda(x.dtype(), out_ptr(grads.dx), out_ptr(grads.dweight), out_ptr(grads.dbias),
                                     dy.raw_data(), x.raw_data(), data_or_null(weight), mean.raw_data(),
                                     rstd.raw_data(), data_or_null(dmean), data_or_null(drstd), N, C,
                                     /*accumulate=*/false, out_ptr(dw_partials), out_ptr(db_partials),
                                     cuda::current_stream());
  } else {
    fail_on_cuda(op, x);
  }
  return grads;
}

RmsNormOutputs rmsnorm(const Tensor& x_in, const Tensor& weight_in, double eps) {
  const char* op = "rmsnorm";
  check_x(x_in, op);
  check_affine(weight_in, x_in, op, "weight");
  check_eps(eps, op);
  const Tensor x = x_in.contiguous(), weight = contiguous_or_undefined(weight_in);
  RmsNormOutputs result{Tensor::empty(x.sizes(), x.dtype(), x.device()),
                        Tensor::empty(row_shape(x), stats_dtype(x.dtype()), x.device())};
  if (x.device().is_cpu()) {
    kernels::rmsnorm_forward_cpu(x.dtype(), result.y.raw_data(), result.rstd.raw_data(), x.raw_data(),
                                 data_or_null(weight), row_count(x), x.size(-1), eps);
  } else if constexpr (kCudaBuilt) {
    kernels::rmsnorm_forward_cuda(x.dtype(), result.y.raw_data(), result.rstd.raw_data(), x.raw_data(),
                                  data_or_null(weight), row_count(x), x.size(-1), eps, cuda::current_stream());
  } else {
    fail_on_cuda(op, x);
  }
  return result;
}

RmsNormGrads rmsnorm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& weight_in, const Tensor& rstd_in,
                              bool need_dx, bool need_dweight, const Tensor& drstd_in) {
  const char* op = "rmsnorm_backward";
  check_x(x_in, op);
  check_affine(weight_in, x_in, op, "weight");
  check_backward_inputs(dy_in, x_in, {{rstd_in, "rstd", false}, {drstd_in, "drstd", true}}, op);
  const Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), weight = contiguous_or_undefined(weight_in);
  const Tensor rstd = rstd_in.contiguous(), drstd = contiguous_or_undefined(drstd_in);
  const int64_t C = x.size(-1);
  RmsNormGrads grads;
  if (need_dx) grads.dx = Tensor::empty(x.sizes(), x.dtype(), x.device());
  if (need_dweight && weight.defined()) grads.dweight = Tensor::empty({C}, x.dtype(), x.device());
  auto out_ptr = [](const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; };
  if (x.device().is_cpu()) {
    kernels::rmsnorm_backward_cpu(x.dtype(), out_ptr(grads.dx), out_ptr(grads.dweight), dy.raw_data(), x.raw_data(),
                                  data_or_null(weight), rstd.raw_data(), data_or_null(drstd), row_count(x), C,
                                  /*accumulate=*/false);
  } else if constexpr (kCudaBuilt) {
    const int64_t N = row_count(x);
    const Tensor dw_partials = column_partials(grads.dweight, x, N, C);
    kernels::rmsnorm_backward_cuda(x.dtype(), out_ptr(grads.dx), out_ptr(grads.dweight), dy.raw_data(), x.raw_data(),
                                   data_or_null(weight), rstd.raw_data(), data_or_null(drstd), N, C,
                                   /*accumulate=*/false, out_ptr(dw_partials), cuda::current_stream());
  } else {
    fail_on_cuda(op, x);
  }
  return grads;
}

}  // namespace fathom
