#include "regression_job.h"

#include <cmath>
#include <filesystem>
#include <vector>

#include "autograd/functions.h"
#include "core/generator.h"
#include "engine/initialize.h"
#include "mpi_test_util.h"
#include "nn/linear.h"

namespace fathom::testing {

std::shared_ptr<nn::Sequential> regression_model(uint64_t seed) {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(8, 16));
  model->push_back(std::make_shared<nn::Linear>(16, 3));
  Generator gen(seed);
  for (const auto& [name, p] : model->named_parameters()) p.data().copy_(uniform(p.sizes(), gen, -0.3, 0.3));
  return model;
}

autograd::Variable regression_loss(Engine& engine, int64_t step, int rank, double scale) {
  std::vector<float> x(2 * 8), t(2 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * static_cast<float>(i + 7 * step + 31 * rank));
  for (size_t i = 0; i < t.size(); ++i) t[i] = std::cos(0.2f * static_cast<float>(i + 5 * step + 17 * rank));
  const autograd::Variable out = engine(autograd::Variable(Tensor::from_vector(x, {2, 8})));
  const autograd::Variable diff = autograd::sub(out, autograd::Variable(Tensor::from_vector(t, {2, 3})));
  const autograd::Variable loss = autograd::mean(autograd::mul(diff, diff));
  return scale == 1.0 ? loss : autograd::mul(loss, scale);
}

RegressionRun run_regression(const RegressionJob& job) {
  const std::shared_ptr<parallel::Communicator> world = job.world ? job.world : runtime().world_ptr();
  const int rank = world->rank();
  auto model = regression_model();
  const std::string schedule = job.warmup_lr ? R"(, "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0,
      "warmup_max_lr": 0.01, "warmup_num_steps": 2, "warmup_type": "linear"}})" : "";
  const Config config = Config::from_string(detail::concat(R"({"train_batch_size": )", 2 * world->size(),
                                                           R"(, "optimizer": )", job.optimizer, schedule, "}"));
  Initialized init = initialize(config, model, nullptr, nullptr, world);
  Engine& engine = *init.engine;
  if (job.resume) engine.load_checkpoint(job.checkpoint_dir);
  RegressionRun run;
  while (engine.global_steps() < job.steps) {
    const int64_t step = engine.global_steps();
    const autograd::Variable loss =
        regression_loss(engine, step, rank, job.zero_first_loss && step == 0 ? 0.0 : 1.0);
    run.losses.push_back(loss.data().item());
    engine.backward(loss);
    engine.step();
    if (engine.global_steps() == job.save_at) engine.save_checkpoint(job.checkpoint_dir);
  }
  for (const auto& [name, p] : model->named_parameters()) run.weights.push_back(p.data().clone());
  run.optimizer = engine.optimizer();
  return run;
}

std::string fresh_checkpoint_dir(const std::string& name, parallel::Communicator& world) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / (name + "_np" + std::to_string(world.size()))).string();
  if (world.rank() == 0) std::filesystem::remove_all(dir);
  world.barrier();
  return dir;
}

}  // namespace fathom::testing
