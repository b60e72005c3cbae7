// Pipeline parallelism's device path (the GPU check's p = 1 row; under emulation in CI): a GPT on
// the GPU cut into one stage and trained through the pipeline executor (1F1B and zero bubble,
// two micro-batches) takes the steps the plain engine takes with gradient accumulation there.
#include "engine/initialize.h"
#include "engine/pipeline_executor.h"
#include "models/decoder.h"
#include "parallel/local_communicator.h"
#include "parallel/pipeline_module.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

namespace {

std::vector<double> train(const std::string& schedule, bool pipelined, nn::NamedTensors* weights) {
  const Device gpu = Device::cuda(0);
  models::DecoderConfig config = models::DecoderConfig::gpt2(/*n_layer=*/2, /*n_head=*/2, /*width=*/16,
                                                             /*vocab_size=*/64, /*positions=*/8);
  config.dropout = 0.1;
  auto gpt = std::make_shared<models::Decoder>(config, /*seed=*/5);
  gpt->to(gpu);
  const auto groups = parallel::ProcessGroups::data_parallel(std::make_shared<parallel::LocalCommunicator>());
  std::shared_ptr<nn::Module> model = gpt;
  if (pipelined) model = std::make_shared<parallel::PipelineModule>(gpt, groups);
  const std::string json = R"({"train_batch_size": 4, "gradient_accumulation_steps": 2, "pipeline": {"schedule": ")" +
                           schedule + R"("}, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}})";
  Initialized init = initialize(Config::from_string(json), model, nullptr, nullptr, groups);
  std::vector<double> losses;
  for (int step = 0; step < 2; ++step) {
    int micro = 0;
    const StepReport& report = init.engine->train_batch([&] {
      std::vector<int64_t> ids(2 * 8), next(2 * 8), rows{step * 4 + 2 * micro, step * 4 + 2 * micro + 1};
      for (int64_t i = 0; i < 16; ++i) ids[i] = (i * 37 + 11 * micro + step) % 64, next[i] = (i * 53 + 2) % 64;
      ++micro;
      return Batch{Tensor::from_vector(ids, {2, 8}), Tensor::from_vector(next, {2, 8}), Tensor::from_vector(rows, {2})};
    });
    losses.push_back(report.loss);
  }
  *weights = init.engine->consolidated_state_dict();
  return losses;
}

}  // namespace

TEST_CASE("a one-stage pipeline on the GPU trains as the engine does, 1F1B and zero bubble", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  nn::NamedTensors expected_weights;
  const std::vector<double> expected = train("1f1b", false, &expected_weights);
  for (const std::string schedule : {"1f1b", "zero_bubble"}) {
    INFO(schedule);
    nn::NamedTensors weights;
    const std::vector<double> losses = train(schedule, true, &weights);
    for (size_t s = 0; s < losses.size(); ++s) CHECK(std::fabs(losses[s] - expected[s]) <= 1e-5 * expected[s]);
    REQUIRE(weights.size() == expected_weights.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      INFO(weights[i].first);
      FATHOM_REQUIRE_CLOSE(weights[i].second, expected_weights[i].second, 1e-5, 1e-5);
    }
  }
}
