// Parallel placement before any tensor-parallel layer exists: a hand-made model whose parameter
// `a` is split by rows over a 2-rank "tensor" group and whose `b` is replicated. Whatever the
// data-parallel size and ZeRO stage, the gradient norm the engine clips by must be the norm of
// the whole (unsplit) gradient — `a`'s squares summed over the tensor group, `b` counted once —
// and an fp16 overflow on one rank must make every rank of the job skip the step.
//
// Run at 2 ranks (tensor 2 x data 1) and 4 (tensor 2 x data 2).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/functions.h"
#include "engine/initialize.h"
#include "mpi_test_util.h"
#include "nn/module.h"
#include "test_util.h"

using namespace fathom;
using fathom::testing::runtime;

namespace {

constexpr int kRows = 4, kCols = 3, kTensor = 2;

// Every rank's gradient contribution: `a`'s rows of tensor rank t, and `b`'s (the same on every
// tensor rank, as a real tensor-parallel layer would make it).
std::vector<float> a_gradient(int data, int tensor) {
  std::vector<float> g;
  for (int i = 0; i < kRows / kTensor * kCols; ++i)
    g.push_back(0.01f * static_cast<float>(i + 1 + 7 * tensor) * (1 + data));
  return g;
}
std::vector<float> b_gradient(int data) { return {0.05f * (1 + data), -0.02f, 0.03f * (2 + data)}; }

struct Handmade : nn::Module {
  autograd::Variable a, b;
  Handmade(int data, int tensor) {
    std::vector<float> rows;  // this tensor rank's rows of the full [4, 3]; data-rank dependent until broadcast
    for (int i = 0; i < kRows / kTensor * kCols; ++i)
      rows.push_back(0.1f * static_cast<float>(tensor * 6 + i) + 100.0f * data);
    a = register_parameter("a", Tensor::from_vector(rows, {kRows / kTensor, kCols}));
    set_placement("a", nn::Placement::shard(0, kTensor, tensor, kRows));
    b = register_parameter("b", Tensor::from_vector<float>({1.0f + data + 10.0f * tensor, 2, 3}));
  }
  std::string type_name() const override { return "Handmade"; }
};

struct Step {
  double grad_norm = 0;
  bool skipped = false;
};

// The norm of the whole gradient after data-parallel averaging.
double expected_norm(int data_size) {
  double squares = 0;
  for (int t = 0; t < kTensor; ++t)
    for (size_t i = 0; i < a_gradient(0, t).size(); ++i) {
      double mean = 0;
      for (int d = 0; d < data_size; ++d) mean += a_gradient(d, t)[i] / data_size;
      squares += mean * mean;
    }
  for (size_t i = 0; i < 3; ++i) {
    double mean = 0;
    for (int d = 0; d < data_size; ++d) mean += b_gradient(d)[i] / data_size;
    squares += mean * mean;
  }
  return std::sqrt(squares);
}

struct Job {
  std::shared_ptr<Handmade> model;
  Initialized init;
  parallel::GridCoord coord;
};

Job start(const std::string& extra) {
  const auto groups = runtime().groups(/*pipeline=*/1, /*tensor=*/kTensor);
  const parallel::GridCoord coord = groups.coord();
  auto model = std::make_shared<Handmade>(coord.data, coord.tensor);
  const int data_size = groups.data().size();
  Config config =
      Config::from_string(detail::concat(R"({"train_batch_size": )", data_size, R"(, "tensor_parallel": {"autotp_size": )",
                                         kTensor, R"(}, "gradient_clipping": 0.05,
          "optimizer": {"type": "SGD", "params": {"lr": 0.1}})",
                                         extra, "}"));
  Initialized init = initialize(config, model, nullptr, nullptr, groups);
  return {model, std::move(init), coord};
}

// One optimizer step with this rank's gradient contributions (`poison`: one of them huge).
Step step(Job& job, bool poison = false) {
  const DType dtype = job.model->a.dtype();
  std::vector<float> ga = a_gradient(job.coord.data, job.coord.tensor);
  if (poison) ga[2] = 60000.0f;  // times fp16's loss scale: Inf on this rank only
  const autograd::Variable ca(Tensor::from_vector(ga, {kRows / kTensor, kCols}).to(dtype));
  const autograd::Variable cb(Tensor::from_vector(b_gradient(job.coord.data)).to(dtype));
  Engine& engine = *job.init.engine;
  engine.backward(
      autograd::add(autograd::sum(autograd::mul(job.model->a, ca)), autograd::sum(autograd::mul(job.model->b, cb))));
  engine.step();
  return {engine.last_report().grad_norm, engine.last_report().skipped};
}

}  // namespace

TEST_CASE("initialize broadcasts replicated parameters over the tensor group, shards over data only", "[parallel]") {
  if (runtime().size() % kTensor != 0) return;
  Job job = start("");
  // b: world rank 0's value everywhere (data rank 0, tensor rank 0); a: data rank 0's rows of
  // this tensor rank.
  CHECK(job.model->b.data().to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(job.model->a.data().to_vector<float>()[0] == Approx(0.6f * job.coord.tensor));
}

TEST_CASE("the gradient norm of a sharded layout is the norm of the whole gradient", "[parallel]") {
  if (runtime().size() % kTensor != 0) return;
  const int data_size = runtime().size() / kTensor;
  for (const std::string extra : {std::string(""), std::string(R"(, "zero_optimization": {"stage": 1})"),
                                  std::string(R"(, "zero_optimization": {"stage": 2})")}) {
    INFO("config" << extra);
    Job job = start(extra);
    const std::vector<float> a_before = job.model->a.data().to_vector<float>();
    const std::vector<float> b_before = job.model->b.data().to_vector<float>();
    const Step s = step(job);
    CHECK(s.grad_norm == Approx(expected_norm(data_size)).epsilon(1e-6));
    // Clipped by that global norm on every rank: w -= lr * (0.05 / (norm + 1e-6)) * mean gradient.
    const double coefficient = 0.05 / (s.grad_norm + 1e-6);
    const std::vector<float> a_after = job.model->a.data().to_vector<float>();
    for (size_t i = 0; i < a_after.size(); ++i) {
      double mean = 0;
      for (int d = 0; d < data_size; ++d) mean += a_gradient(d, job.coord.tensor)[i] / data_size;
      CHECK(a_after[i] == Approx(a_before[i] - 0.1 * coefficient * mean).epsilon(1e-6));
    }
    const std::vector<float> b_after = job.model->b.data().to_vector<float>();
    for (size_t i = 0; i < b_after.size(); ++i) {
      double mean = 0;
      for (int d = 0; d < data_size; ++d) mean += b_gradient(d)[i] / data_size;
      CHECK(b_after[i] == Approx(b_before[i] - 0.1 * coefficient * mean).epsilon(1e-6));
    }
  }
}

TEST_CASE("an fp16 overflow on one tensor rank skips the step on every rank of the job", "[parallel]") {
  if (runtime().size() % kTensor != 0) return;
  // A loss scale of 2^8: the hand-made loss is itself 16-bit, so 2^16 (the default) would
  // overflow in the loss's own backward on every rank.
  const std::string fp16 = R"(, "fp16": {"enabled": true, "initial_scale_power": 8})";
  for (const std::string extra : {fp16, fp16 + R"(, "zero_optimization": {"stage": 2})"}) {
    INFO("config" << extra);
    Job job = start(extra);
    CHECK_FALSE(step(job).skipped);
    // Only the last rank of the job (tensor rank 1, the last data rank) overflows.
    const bool poisoned = runtime().rank() == runtime().size() - 1;
    const std::vector<float> b_before = job.model->b.data().to(DType::F32).to_vector<float>();
    CHECK(step(job, poisoned).skipped);
    CHECK(job.init.engine->skipped_steps() == 1);
    CHECK(job.model->b.data().to(DType::F32).to_vector<float>() == b_before);  // nothing moved
    CHECK_FALSE(step(job).skipped);
  }
}

TEST_CASE("turning gradient reduction off leaves each rank its own gradient (stage 0 only)", "[parallel]") {
  struct One : nn::Module {
    autograd::Variable w;
    One() { w = register_parameter("w", Tensor::from_vector<float>({1, 2, 3})); }
  };
  const int rank = runtime().rank(), world = runtime().size();
  const auto contribution = [](int r) { return std::vector<float>{0.1f * (r + 1), -0.2f * r, 0.3f}; };
  for (const bool reduce : {true, false}) {
    INFO("reduce " << reduce);
    auto model = std::make_shared<One>();
    const Initialized init =
        initialize(Config::from_string(detail::concat(R"({"train_batch_size": )", world,
                                                      R"(, "optimizer": {"type": "SGD", "params": {"lr": 1.0}}})")),
                   model, nullptr, nullptr, runtime().world_ptr());
    init.engine->training_state().set_gradient_reduction(reduce);
    init.engine->backward(
        autograd::sum(autograd::mul(model->w, autograd::Variable(Tensor::from_vector(contribution(rank))))));
    init.engine->step();
    const std::vector<float> w = model->w.data().to_vector<float>();
    for (size_t i = 0; i < 3; ++i) {
      double mean = 0;
      for (int r = 0; r < world; ++r) mean += contribution(r)[i] / world;
      const double gradient = reduce ? mean : contribution(rank)[i];
      CHECK(w[i] == Approx((i + 1.0) - gradient).epsilon(1e-6));
    }
  }
  auto model = std::make_shared<One>();
  const Initialized sharded = initialize(
      Config::from_string(detail::concat(R"({"train_batch_size": )", world, R"(, "zero_optimization": {"stage": 1},
          "optimizer": {"type": "SGD", "params": {"lr": 1.0}}})")),
      model, nullptr, nullptr, runtime().world_ptr());
  CHECK_THROWS_WITH(sharded.engine->training_state().set_gradient_reduction(false),
                    Catch::Contains("needs zero_optimization.stage 0"));
}
