// The communication-compressed optimizers' updates on GPU tensors (their tensor-op paths) agree
// with the host's (fused loops), through warm-up and the frozen stage. One process: nothing to
// exchange, so this checks the update arithmetic on the device.
#include <cmath>

#include "parallel/compressed_optimizers.h"
#include "parallel/local_communicator.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

namespace {
std::vector<Tensor> train(const std::string& type, const nn::OptimizerParams& params, Device device, int steps) {
  std::vector<autograd::Variable> weights;
  for (int64_t n : {37, 4096 * 17}) {
    std::vector<float> start(static_cast<size_t>(n));
    for (size_t i = 0; i < start.size(); ++i) start[i] = 0.3f * std::cos(0.11f * static_cast<float>(i) + n);
    weights.emplace_back(Tensor::from_vector(start, {n}).to(device), true);
  }
  auto optimizer = parallel::make_compressed_optimizer(type, params, nn::single_group(weights),
                                                       std::make_shared<parallel::LocalCommunicator>());
  for (int step = 0; step < steps; ++step) {
    for (const autograd::Variable& w : weights) {
      std::vector<float> g(static_cast<size_t>(w.data().numel()));
      for (size_t i = 0; i < g.size(); ++i) g[i] = 0.05f * std::sin(0.7f * static_cast<float>(i) + 3.1f * step);
      w.set_grad(Tensor::from_vector(g, w.sizes()).to(device));
    }
    optimizer->step();
  }
  std::vector<Tensor> out;
  for (const autograd::Variable& w : weights) out.push_back(w.data().to(kCPU));
  return out;
}
}  // namespace

TEST_CASE("CUDA compressed optimizers: warm-up and frozen steps agree with the host's", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const std::vector<std::pair<std::string, nn::OptimizerParams>> cases = {
      {"OneBitAdam", {{"lr", 1e-3}, {"weight_decay", 0.01}, {"freeze_step", 3}}},
      {"ZeroOneAdam", {{"lr", 1e-3}, {"weight_decay", 0.01}, {"var_freeze_step", 4}, {"var_update_scaler", 1},
                       {"local_step_scaler", 1}, {"local_step_clipper", 2}}},
      {"OneBitLamb", {{"lr", 1e-2}, {"weight_decay", 0.01}, {"freeze_step", 3}}},
  };
  for (const auto& [type, params] : cases) {
    INFO(type);
    const std::vector<Tensor> host = train(type, params, kCPU, 9);
    const std::vector<Tensor> gpu = train(type, params, Device::cuda(0), 9);
    for (size_t i = 0; i < host.size(); ++i) FATHOM_REQUIRE_CLOSE(gpu[i], host[i], 1e-6, 1e-5);
  }
}
