#pragma once
// GradientAveraging: how data parallelism averages gradients over the data group, with
// DeepSpeed's three knobs:
//   prescale_gradients: divide by the data-parallel size N before the sum (keeps a 16-bit sum
//     from overflowing), instead of after it;
//   gradient_predivide_factor f (without prescaling): divide by f before the sum and by N / f
//     after it;
//   communication_data_type: the dtype gradients travel and are summed in (the gradients' own
//     when unset — Fathom's default, which at stage 0 in mixed precision is fp32).
// With none of them set the reduction is the communicator's Avg (which divides in f32 before
// rounding a 16-bit result). With any of them it is DeepSpeed's: a sum in the communication
// dtype between the two scalings, so an fp16 sum can overflow unless prescaled.

#include <optional>

#include "core/dtype.h"
#include "parallel/communicator.h"

namespace fathom::parallel {

struct GradientAveraging {
  bool prescale = false;
  double predivide_factor = 1.0;
  std::optional<DType> dtype;

  // Scaling before and after the reduction over `world` ranks (1.0: none), and its op.
  double before(int world) const;
  double after(int world) const;
  ReduceOp op() const { return plain() ? ReduceOp::Avg : ReduceOp::Sum; }
  bool plain() const { return !prescale && predivide_factor == 1.0 && !dtype; }
  // The dtype a bucket of gradients of `gradient_dtype` is reduced in.
  DType dtype_for(DType gradient_dtype) const { return dtype.value_or(gradient_dtype); }
};

// tensor *= factor, unless factor is 1.
void scale_in_place(const Tensor& tensor, double factor);

}  // namespace fathom::parallel
