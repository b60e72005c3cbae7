// 1-bit LAMB: one compressed step against a hand-written reference of DeepSpeed's rule; its
// warm-up against its uncompressed twin (LAMB without bias correction, whose first step moves
// nothing) at every world size; training the tiny GPT after the freeze; checkpoints.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/initialize.h"
#include "gpt_training.h"
#include "mpi_test_util.h"
#include "nn/linear.h"
#include "parallel/compressed_optimizers.h"
#include "parallel/local_communicator.h"
#include "parallel/onebit_lamb.h"
#include "regression_job.h"
#include "test_util.h"

using namespace fathom;
using fathom::testing::run_regression;
using fathom::testing::runtime;
using fathom::testing::train_tiny_gpt;
using fathom::testing::TrainingRun;

namespace {
// DeepSpeed's 1-bit LAMB on one rank for one tensor, in f64: the reference.
struct Reference {
  std::vector<double> p, m, v, fresh;
  double frozen = 0, last_factor = 1;
};
double norm(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}
}  // namespace

TEST_CASE("1-bit LAMB's steps follow DeepSpeed's rule: nothing, warm-up, then the frozen-variance step",
          "[onebit]") {
  constexpr double kLr = 0.1, kB1 = 0.9, kB2 = 0.99, kEps = 1e-8, kDecay = 0.01, kCoeffBeta = 0.5;
  const std::vector<std::vector<float>> start = {{0.5f, -0.25f, 0.75f, 0.1f}, {-0.3f, 0.2f}};
  const auto grad_at = [](int step, size_t t, size_t i) {
    return 0.1 * std::sin(1.0 + 3.0 * step + 1.7 * static_cast<double>(t) + 0.9 * static_cast<double>(i));
  };
  std::vector<autograd::Variable> params;
  for (const auto& values : start)
    params.emplace_back(Tensor::from_vector(values, {static_cast<int64_t>(values.size())}), true);
  parallel::OneBitLambOptions options;
  options.lr = kLr;
  options.betas = {kB1, kB2};
  options.eps = kEps;
  options.weight_decay = kDecay;
  options.freeze_step = 2;
  options.coeff_beta = kCoeffBeta;
  parallel::OneBitLamb lamb(nn::single_group(params), options, std::make_shared<parallel::LocalCommunicator>());

  std::vector<Reference> ref(start.size());
  for (size_t t = 0; t < start.size(); ++t) {
    ref[t].p.assign(start[t].begin(), start[t].end());
    ref[t].m.assign(start[t].size(), 0.0);
    ref[t].v = ref[t].fresh = ref[t].m;
  }
  std::vector<std::vector<double>> before(start.size());
  std::vector<double> scaling(start.size());
  for (int step = 1; step <= 4; ++step) {
    for (size_t t = 0; t < params.size(); ++t) {
      std::vector<float> g(start[t].size());
      for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(grad_at(step, t, i));
      params[t].set_grad(Tensor::from_vector(g, params[t].sizes()));
    }
    lamb.step();
    if (step == 3) {  // the first compressed step fixes the scaling coefficients (mean scale / own)
      double mean = 0;
      for (size_t t = 0; t < ref.size(); ++t) mean += norm(ref[t].m) / std::sqrt(double(ref[t].m.size())) / 2;
      for (size_t t = 0; t < ref.size(); ++t) scaling[t] = mean / (norm(ref[t].m) / std::sqrt(double(ref[t].m.size())));
    }
    for (size_t t = 0; t < ref.size(); ++t) {
      Reference& r = ref[t];
      const size_t n = r.p.size();
      std::vector<double> g(n), u(n), prelim(n);
      for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(grad_at(step, t, i));
      if (step == 1) continue;  // DeepSpeed's initialisation step
      if (step == 2) {          // warm-up: LAMB without bias correction
        for (size_t i = 0; i < n; ++i) {
          r.m[i] = kB1 * r.m[i] + (1 - kB1) * g[i];
          r.v[i] = kB2 * r.v[i] + (1 - kB2) * g[i] * g[i];
          u[i] = r.m[i] / (std::sqrt(r.v[i]) + kEps) + kDecay * r.p[i];
        }
        const double c = std::clamp(norm(r.p) / norm(u), 0.01, 10.0);
        r.frozen = kCoeffBeta * r.frozen + (1 - kCoeffBeta) * c;
        for (size_t i = 0; i < n; ++i) r.p[i] -= kLr * c * u[i];
        r.fresh = r.v;  // step 2 is the last of the warm-up
        continue;
      }
      // Compressed (one rank: the exchange is the identity): the gradient reconstructed from the
      // momentum feeds the fresh variance, whose ratio to the frozen one scales the frozen ratio.
      before[t] = r.m;
      double factor = 0;
      for (size_t i = 0; i < n; ++i) {
        r.m[i] = kB1 * r.m[i] + (1 - kB1) * g[i];
        const double g_hat = (r.m[i] - kB1 * before[t][i]) / (1 - kB1);
        r.fresh[i] = kB2 * r.fresh[i] + (1 - kB2) * g_hat * g_hat;
        const double denom = std::sqrt(r.v[i]) + kEps;
        prelim[i] = r.m[i] / denom;
        u[i] = prelim[i] + kDecay * r.p[i];
        factor = std::max(factor, denom / (std::sqrt(r.fresh[i]) + kEps));
      }
      const double ratio = std::min(1.0, norm(prelim) / norm(u));
      factor = std::clamp(factor * ratio + (1 - ratio), 0.5, 4.0);
      factor = std::clamp(factor, r.last_factor * 0.9, r.last_factor * 1.1);
      r.last_factor = factor;
      for (size_t i = 0; i < n; ++i) r.p[i] -= kLr * r.frozen * factor * u[i];
    }
    INFO("step " << step);
    for (size_t t = 0; t < params.size(); ++t) {
      INFO("tensor " << t);
      std::vector<float> expected(ref[t].p.begin(), ref[t].p.end());
      FATHOM_REQUIRE_CLOSE(params[t].data(), Tensor::from_vector(expected, params[t].sizes()), 1e-6, 1e-5);
      CHECK(lamb.scalar_state(params[t], "lamb_coeff_freeze") == Approx(ref[t].frozen).epsilon(1e-6));
      CHECK(lamb.scalar_state(params[t], "last_factor") == Approx(ref[t].last_factor).epsilon(1e-6));
      if (step >= 3) CHECK(lamb.scalar_state(params[t], "scaling_coeff") == Approx(scaling[t]).epsilon(1e-6));
    }
    CHECK(lamb.compressing() == (step >= 2));
  }
  // Some factor was clamped by the threshold or the range: the test covers those branches.
  CHECK(ref[0].last_factor != 1.0);

  // The state dict carries the scalars; a copy continues identically.
  parallel::OneBitLamb copy(nn::single_group(std::vector<autograd::Variable>{
                                autograd::Variable(params[0].data().clone(), true),
                                autograd::Variable(params[1].data().clone(), true)}),
                            options, std::make_shared<parallel::LocalCommunicator>());
  copy.load_state_dict(lamb.state_dict());
  const std::vector<autograd::Variable>& twins = copy.param_groups()[0].params;
  CHECK(copy.scalar_state(twins[0], "last_factor") == lamb.scalar_state(params[0], "last_factor"));
  for (size_t t = 0; t < params.size(); ++t) {
    const Tensor g = Tensor::full(params[t].sizes(), 0.01f * static_cast<float>(t + 1));
    params[t].set_grad(g.clone());
    twins[t].set_grad(g.clone());
  }
  lamb.step();
  copy.step();
  for (size_t t = 0; t < params.size(); ++t) FATHOM_REQUIRE_CLOSE(twins[t].data(), params[t].data(), 0.0, 0.0);
  nn::OptimizerStateDict missing = lamb.state_dict();
  std::erase_if(missing.scalars, [](const auto& entry) { return entry.first.ends_with("last_factor"); });
  CHECK_THROWS_WITH(copy.load_state_dict(missing), Catch::Contains("missing entry") &&
                                                       Catch::Contains("last_factor") && Catch::Contains("scalar state"));

  // After the freeze every parameter needs a gradient (the momenta travel as one buffer).
  params[1].zero_grad();
  const Tensor kept = params[0].data().clone(), momentum = lamb.state(params[0], "exp_avg").clone();
  CHECK_THROWS_WITH(lamb.step(), Catch::Contains("1 of the 2 parameters of group 0 have gradients this step"));
  FATHOM_REQUIRE_CLOSE(params[0].data(), kept, 0.0, 0.0);  // refused before anything moved
  FATHOM_REQUIRE_CLOSE(lamb.state(params[0], "exp_avg"), momentum, 0.0, 0.0);
}

namespace {
// The regression with WarmupLR from 0 (lr 0 at the first step) and the first step's loss times 0,
// so the twin's first step moves nothing, as 1-bit LAMB's initialisation step.
fathom::testing::RegressionRun lamb_regression(const std::string& optimizer, int steps) {
  return run_regression({.optimizer = optimizer, .steps = steps, .warmup_lr = true, .zero_first_loss = true});
}
}  // namespace

TEST_CASE("1-bit LAMB's warm-up is its uncompressed twin", "[onebit]") {
  const auto& world = runtime().world_ptr();
  constexpr int kSteps = 8;
  const auto onebit = lamb_regression(R"({"type": "OneBitLamb", "params": {"lr": 0.01, "weight_decay": 0.1,
      "max_coeff": 0.5, "freeze_step": 100, "comm_backend_name": "mpi"}})", kSteps);
  const auto twin = lamb_regression(R"({"type": "Lamb", "params": {"lr": 0.01, "weight_decay": 0.1,
      "max_coeff": 0.5, "bias_correction": false}})", kSteps);
  INFO(world->size() << " ranks");
  REQUIRE(onebit.losses.size() == twin.losses.size());
  for (size_t s = 0; s < twin.losses.size(); ++s) {
    INFO("step " << s + 1);
    CHECK(onebit.losses[s] == Approx(twin.losses[s]).epsilon(1e-6));
  }
  for (size_t i = 0; i < twin.weights.size(); ++i) FATHOM_REQUIRE_CLOSE(onebit.weights[i], twin.weights[i], 1e-6, 1e-6);
  CHECK(!dynamic_cast<const parallel::OneBitLamb&>(*onebit.optimizer).compressing());
  // It trained: the weights moved from the start.
  CHECK(fathom::testing::mismatch(twin.weights[0], fathom::testing::regression_model()->named_parameters()[0].second.data(),
                                  0.0, 0.0) != "");
}

TEST_CASE("after the freeze 1-bit LAMB sends compressed momenta and trains the tiny GPT within 5% of Adam",
          "[onebit]") {
  const auto& world = runtime().world_ptr();
  // LAMB's trust ratio wants a larger lr than Adam's, and a floor on the ratio for the tiny GPT's
  // small-norm matrices. Measured (mean loss of the last 5 steps; Adam 2.665, start 4.120):
  // 1-bit LAMB 2.697 at 1 rank, 2.670 at 2, 2.661 at 4.
  constexpr int kSteps = 40, kFreeze = 20;  // half the steps compressed
  const auto config = [](const std::string& optimizer, const std::string& lr) {
    return detail::concat(R"({"train_batch_size": 24, "seed": 7, "optimizer": )", optimizer,
                          R"(, "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": )",
                          lr, R"(, "warmup_num_steps": 2, "warmup_type": "linear"}}})");
  };
  const TrainingRun adam = train_tiny_gpt(
      config(R"({"type": "AdamW", "params": {"lr": 2e-3, "weight_decay": 0.1, "bias_correction": false}})", "2e-3"),
      world, kSteps);
  const TrainingRun compressed = train_tiny_gpt(
      config(detail::concat(R"({"type": "OneBitLamb", "params": {"weight_decay": 0.1, "min_coeff": 0.1,
                                "freeze_step": )", kFreeze, R"(, "comm_backend_name": "mpi"}})"), "0.05"),
      world, kSteps);
  const auto tail = [](const std::vector<double>& l) { return std::accumulate(l.end() - 5, l.end(), 0.0) / 5; };
  const double a = tail(adam.losses), b = tail(compressed.losses);
  INFO("mean loss of the last 5 of " << kSteps << " steps at " << world->size() << " ranks: Adam " << a
                                     << ", 1-bit LAMB " << b << " (start " << adam.losses.front() << ")");
  CHECK(b < adam.losses.front() * 0.9);  // it learned
  CHECK(std::fabs(b - a) / a < 0.05);
  const auto& optimizer = dynamic_cast<const parallel::OneBitLamb&>(*compressed.engine->optimizer());
  CHECK(optimizer.compressing());
  if (world->size() > 1) CHECK(optimizer.compressed_steps() == kSteps - kFreeze);
  // Every rank holds the same weights: the compressed mean is the same everywhere.
  for (const auto& [name, weight] : compressed.weights) {
    Tensor max = weight.clone(), min = weight.clone();
    world->all_reduce(max, parallel::ReduceOp::Max);
    world->all_reduce(min, parallel::ReduceOp::Min);
    INFO(name);
    FATHOM_REQUIRE_CLOSE(max, min, 0.0, 0.0);
  }
}

namespace {
fathom::testing::RegressionRun onebit_lamb_run(int steps, int save_at, const std::string& dir, bool resume,
                                               std::shared_ptr<parallel::Communicator> world = nullptr) {
  return run_regression({.optimizer = R"({"type": "OneBitLamb", "params": {"lr": 0.01, "weight_decay": 0.01,
                             "freeze_step": 4, "comm_backend_name": "mpi"}})",
                         .steps = steps, .checkpoint_dir = dir, .save_at = save_at, .resume = resume,
                         .world = std::move(world)});
}
}  // namespace

TEST_CASE("1-bit LAMB resumed after the freeze is bit-identical; at another world size it keeps its scalars",
          "[onebit]") {
  const auto& world = runtime().world_ptr();
  const std::string dir = fathom::testing::fresh_checkpoint_dir("fathom_onebit_lamb_resume", *world);
  const auto straight = onebit_lamb_run(12, 8, dir, false);  // saved at 8, compressed since 5
  const auto resumed = onebit_lamb_run(12, -1, dir, true);
  REQUIRE(straight.weights.size() == resumed.weights.size());
  for (size_t i = 0; i < straight.weights.size(); ++i) FATHOM_REQUIRE_CLOSE(resumed.weights[i], straight.weights[i], 0.0, 0.0);

  // Each rank alone resumes the same checkpoint: the error feedback starts afresh, but the frozen
  // trust ratio and the scaling coefficients are the saved ones (they are the same on every rank).
  world->barrier();
  const auto self = world->split(world->rank(), 0, "self");
  const auto alone = onebit_lamb_run(8, -1, dir, true, self);
  const nn::Optimizer& saved = *straight.optimizer;
  const nn::Optimizer& loaded = *alone.optimizer;
  for (size_t i = 0; i < saved.param_groups()[0].params.size(); ++i) {
    const autograd::Variable& a = saved.param_groups()[0].params[i];
    const autograd::Variable& b = loaded.param_groups()[0].params[i];
    CHECK(loaded.scalar_state(b, "lamb_coeff_freeze") > 0);
    CHECK(loaded.scalar_state(b, "scaling_coeff") == saved.scalar_state(a, "scaling_coeff"));
    CHECK(loaded.scalar_state(b, "lamb_coeff_freeze") == saved.scalar_state(a, "lamb_coeff_freeze"));
  }
  if (world->size() > 1) CHECK(loaded.rank_local_state().empty());
  world->barrier();
}

TEST_CASE("1-bit LAMB's bad settings are errors naming them", "[onebit]") {
  const auto& world = runtime().world_ptr();
  const auto config = [&](const std::string& optimizer, int stage = 0) {
    return Config::from_string(detail::concat(R"({"train_batch_size": )", world->size(), R"(, "optimizer": )",
                                              optimizer, R"(, "zero_optimization": {"stage": )", stage, "}}"));
  };
  CHECK_THROWS_WITH(config(R"({"type": "OneBitLamb", "params": {"freeze_step": -1}})"),
                    Catch::Contains("optimizer.params.freeze_step") &&
                        Catch::Contains("\"freeze_step\" must be a whole number >= 0, got -1"));
  CHECK_THROWS_WITH(config(R"({"type": "OneBitLamb", "params": {"coeff_beta": 1}})"),
                    Catch::Contains("\"coeff_beta\" must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(config(R"({"type": "OneBitLamb", "params": {"factor_treshold": 0.2}})"),
                    Catch::Contains("unknown optimizer parameter \"factor_treshold\"; did you mean \"factor_threshold\"?"));
  auto model = std::make_shared<nn::Linear>(4, 2);
  CHECK_THROWS_WITH(initialize(config(R"({"type": "onebitlamb"})", 2), model, nullptr, nullptr, world),
                    Catch::Contains("config error at zero_optimization.stage: onebitlamb communicates its own "
                                    "compressed momentum") && Catch::Contains("stage is 2, use 0"));
}

TEST_CASE("error-feedback state that does not fit the optimizer is refused, naming it", "[onebit]") {
  // (As a checkpoint from another model or optimizer would give it; the engine passes it on only at
  // the same world size.)
  const autograd::Variable w(Tensor::zeros({4}), true, "w");
  const auto local = std::make_shared<parallel::LocalCommunicator>();
  parallel::OneBitLamb lamb(nn::single_group(std::vector{w}), {}, local);
  CHECK_THROWS_WITH(lamb.load_rank_local_state({Tensor::zeros({32}), Tensor::zeros({32}), Tensor::zeros({1})}),
                    Catch::Contains("OneBitLamb: its error-feedback state is one worker and one server buffer, got 3"));
  auto adam = parallel::make_compressed_optimizer("OneBitAdam", {}, nn::single_group(std::vector{w}), local);
  CHECK_THROWS_WITH(adam->load_rank_local_state({Tensor::zeros({3}), Tensor::zeros({3})}),
                    Catch::Contains("OneBitAdam: the checkpoint's error buffers of parameter 0 of group 0 do not match "
                                    "this world size and model"));
  CHECK_THROWS_WITH(adam->load_rank_local_state({Tensor::zeros({32}), Tensor::zeros({32}), Tensor::zeros({32})}),
                    Catch::Contains("the checkpoint's error buffers do not match this optimizer's parameters"));
}
