#include "zero/gradient_shard.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/allocator.h"
#include "core/error.h"
#include "core/memory_stats.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/reduction.h"
#include "offload/host_memory.h"
#include "zero/training_state.h"

namespace fathom::zero {

std::vector<Range> norm_pieces(const std::vector<Range>& counted, int64_t block) {
  FATHOM_CHECK(block > 0, "norm_pieces: the block must be > 0");
  std::vector<Range> pieces;
  for (const Range& range : counted)
    for (int64_t begin = range.begin; begin < range.end;) {
      const int64_t end = std::min(range.end, (begin / block + 1) * block);
      pieces.push_back({begin, end});
      begin = end;
    }
  return pieces;
}

double sum_of_squares(const Tensor& piece) { return reduce(ReduceOp::SumOfSquares, piece, {}, false).item(); }

ResidentGradient::ResidentGradient(int64_t numel, DType accumulated, bool accumulates, GradientPlacement placement,
                                   std::vector<Range> counted, int64_t norm_block)
    : GradientShard(numel, std::move(counted), norm_block),
      accumulated_(accumulated),
      accumulates_(accumulates),
      placement_(placement) {
  if (accumulates_) allocate_zeros();
}

template <class Fn>
void ResidentGradient::in_place(Fn&& fn) const {
  MemoryTagScope tag(MemoryTag::Gradients);
  std::optional<offload::HostTierScope> host;
  if (placement_.host_tier) host.emplace(placement_.pin_memory);
  fn();
}

void ResidentGradient::allocate_zeros() {
  in_place([&] { values_ = Tensor::zeros({numel()}, accumulated_, placement_.device); });
}

void ResidentGradient::add(const Tensor& part, int64_t offset) {
  FATHOM_CHECK(accumulates_ && !complete_, "ZeRO: a gradient added outside backward's accumulation");
  Tensor target = values_.narrow(0, offset, part.numel());
  add_(target, part.dtype() == target.dtype() ? part : part.to(target.dtype()));
}

void ResidentGradient::assign(Tensor reduced) {
  FATHOM_CHECK(reduced.numel() == numel(), "ZeRO: a reduced gradient of ", reduced.numel(), " elements for a shard of ",
               numel());
  values_ = std::move(reduced);
}

// fp32 where the optimizer reads it; a buffer already so is adopted as it is, so that a rank
// holds one gradient buffer at the boundary, not two.
void ResidentGradient::end_backward(bool boundary) {
  if (!boundary) return;
  in_place([&] {
    const Allocator& tier = allocator_for_new(placement_.device);
    if (values_.dtype() == DType::F32 && values_.device() == placement_.device && values_.storage()->allocator() == &tier)
      return;
    Tensor f32 = values_.dtype() == DType::F32 ? values_ : values_.to(DType::F32);
    if (f32.device() != placement_.device) f32 = f32.to(placement_.device);
    values_ = f32.storage() == values_.storage() || f32.storage()->allocator() != &tier ? f32.clone() : f32;
  });
  complete_ = true;
}

bool ResidentGradient::has_inf_or_nan() { return complete_ && fathom::has_inf_or_nan({values_}); }

double ResidentGradient::norm() {
  if (!complete_) return 0.0;
  std::vector<Tensor> views;
  for (const Range& piece : pieces()) views.push_back(values_.narrow(0, piece.begin, piece.size()));
  return global_norm(views);
}

void ResidentGradient::scale(double factor) {
  if (complete_) scale_tensors({values_}, factor);
}

Tensor ResidentGradient::read(Range range) {
  FATHOM_CHECK(complete_, "ZeRO: the gradient read before the boundary's reductions");
  return values_.narrow(0, range.begin, range.size());
}

void ResidentGradient::write(Range range, const Tensor& values) { read(range).copy_(values); }

void ResidentGradient::zero() {
  complete_ = false;
  if (!accumulates_) values_ = Tensor();
  else if (values_.defined() && values_.dtype() == accumulated_) values_.zero_();
  else allocate_zeros();
}

}  // namespace fathom::zero
