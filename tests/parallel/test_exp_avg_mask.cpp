// DeepSpeed's exp_avg_mask on each compressed optimizer: entries whose gradient is always zero
// drift on the 1-bit error feedback (sign(0) is +1) unless masked; masked, they stay put.
#include <cmath>

#include "kernels/elementwise.h"
#include "mpi_test_util.h"
#include "parallel/compressed_optimizer.h"
#include "parallel/compressed_optimizers.h"
#include "test_util.h"

using namespace fathom;
using fathom::testing::runtime;

namespace {
constexpr int64_t kLive = 32, kDead = 32;  // entries with a gradient, entries always without

// Trains one parameter for `steps` with `type` over the world; its last kDead entries never get
// a gradient. Returns the parameter's final values.
Tensor train(const std::string& type, const nn::OptimizerParams& params, int steps, bool masked) {
  const auto& world = runtime().world_ptr();
  std::vector<float> start(kLive + kDead);
  for (size_t i = 0; i < start.size(); ++i) start[i] = 0.5f * std::cos(0.37f * static_cast<float>(i));
  const autograd::Variable p(Tensor::from_vector(start, {kLive + kDead}), true);
  auto optimizer = parallel::make_compressed_optimizer(type, params, nn::single_group(std::vector{p}), world);
  if (masked) {
    std::vector<float> mask(kLive + kDead, 0.0f);
    std::fill(mask.begin(), mask.begin() + kLive, 1.0f);
    dynamic_cast<parallel::CompressedOptimizer&>(*optimizer).set_exp_avg_mask(p, Tensor::from_vector(mask, p.sizes()));
  }
  for (int step = 0; step < steps; ++step) {
    std::vector<float> g(kLive + kDead, 0.0f);
    for (int64_t i = 0; i < kLive; ++i)
      g[i] = 0.1f * std::sin(1.3f * static_cast<float>(i + 11 * step + 29 * world->rank()));
    Tensor grad = Tensor::from_vector(g, p.sizes());
    // The engine would average while the optimizer asks for it (its warm-up): so do we.
    if (optimizer->wants_reduced_gradients()) {
      world->all_reduce(grad, parallel::ReduceOp::Sum);
      mul_(grad, 1.0 / world->size());
    }
    p.set_grad(grad);
    optimizer->step();
  }
  CHECK(dynamic_cast<const parallel::CompressedOptimizer&>(*optimizer).compressed_steps() > 0);
  return p.data().clone();
}
}  // namespace

TEST_CASE("exp_avg_mask holds always-zero momentum entries at zero on every compressed optimizer", "[onebit]") {
  const auto& world = runtime().world_ptr();
  if (world->size() == 1) return;  // nothing is compressed on one rank
  const std::string mpi = "mpi";
  const std::vector<std::pair<std::string, nn::OptimizerParams>> cases = {
      {"OneBitAdam", {{"lr", 1e-3}, {"freeze_step", 2}, {"comm_backend_name", nn::OptimizerValue(mpi)}}},
      {"ZeroOneAdam", {{"lr", 1e-3}, {"var_freeze_step", 4}, {"var_update_scaler", 1}, {"local_step_scaler", 1},
                       {"local_step_clipper", 2}, {"comm_backend_name", nn::OptimizerValue(mpi)}}},
      {"OneBitLamb", {{"lr", 1e-3}, {"freeze_step", 2}, {"comm_backend_name", nn::OptimizerValue(mpi)}}},
  };
  std::vector<float> start(kLive + kDead);
  for (size_t i = 0; i < start.size(); ++i) start[i] = 0.5f * std::cos(0.37f * static_cast<float>(i));
  const Tensor dead_start = Tensor::from_vector(start, {kLive + kDead}).narrow(0, kLive, kDead);
  for (const auto& [type, params] : cases) {
    INFO(type << " at " << world->size() << " ranks");
    const Tensor plain = train(type, params, 10, false);
    const Tensor masked = train(type, params, 10, true);
    // Unmasked, the dead entries moved on the compression's error alone.
    CHECK(fathom::testing::mismatch(plain.narrow(0, kLive, kDead), dead_start, 1e-6, 0.0) != "");
    FATHOM_REQUIRE_CLOSE(masked.narrow(0, kLive, kDead), dead_start, 0.0, 0.0);
    CHECK(fathom::testing::mismatch(masked.narrow(0, 0, kLive), Tensor::from_vector(start, {kLive + kDead}).narrow(0, 0, kLive),
                                    1e-6, 0.0) != "");  // the live ones trained
  }
}

TEST_CASE("exp_avg_mask: a mask that does not fit its parameter is an error naming it", "[onebit]") {
  const autograd::Variable p(Tensor::zeros({4, 3}), true, "w");
  auto optimizer = parallel::make_compressed_optimizer("OneBitAdam", {}, nn::single_group(std::vector{p}),
                                                       runtime().world_ptr());
  auto& compressed = dynamic_cast<parallel::CompressedOptimizer&>(*optimizer);
  CHECK_NOTHROW(compressed.set_exp_avg_mask(p, Tensor::ones({4, 1})));  // broadcasts over columns
  CHECK_THROWS_WITH(compressed.set_exp_avg_mask(p, Tensor::ones({5})), Catch::Contains("the exp_avg_mask of \"w\" has shape [5], which does not broadcast to the parameter's [4, 3]"));
  CHECK_THROWS_WITH(compressed.set_exp_avg_mask(autograd::Variable(Tensor::zeros({2}), true, "other"), Tensor::ones({2})),
                    Catch::Contains("is not optimized by this optimizer"));
}
