// A deliberately failing job for the failure tests (CTest checks its output):
//   throw     rank 1 throws while rank 0 waits in a collective: the job must end at once
//   mismatch  under FATHOM_COMM_DEBUG=1, rank 0 all-reduces while rank 1 broadcasts
//   hang      rank 1 never joins rank 0's all-reduce: FATHOM_COMM_TIMEOUT must end the job
//   checkpoint-crash DIR POINT  saves tag "a", then dies while saving tag "b" (fault injection at
//                          POINT: "shard" between two shard writes, "index" before the rename)
//   checkpoint-load DIR    loads the latest tag and prints its client state
//   zero3-uneven-forward  under ZeRO-3 rank 0 runs one forward more than the others (the
//             classic DeepSpeed ZeRO-3 hang): FATHOM_COMM_DEBUG=1 must report it
//   pipeline-stuck  stage 0 of a 2-stage pipeline trains a step while stage 1 never does: the
//             transfer timeout must end the job naming the stage, micro-batch and direction
//   pipeline-mismatch  the two stages run different micro-batch counts: FATHOM_COMM_DEBUG=1 must
//             report it before any transfer
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "engine/initialize.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "parallel/pipeline_module.h"
#include "parallel/runtime.h"

using namespace fathom;

int main(int argc, char** argv) {
  parallel::Runtime runtime(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  parallel::Communicator& world = runtime.world();
  Tensor values = Tensor::ones({1024});
  if (mode == "throw") {
    if (world.rank() == 1) FATHOM_FAIL("matmul: shapes [4, 64] and [32, 10] do not match (64 != 32)");
    world.all_reduce(values);  // rank 1 never comes
  } else if (mode == "mismatch") {
    if (world.rank() == 0) world.all_reduce(values);
    else world.broadcast(values, 0);
  } else if (mode == "checkpoint-crash" || mode == "checkpoint-load") {
    auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"));
    Initialized init = initialize(Config::from_string(R"({"train_batch_size": 2,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": 2}})"),
                                  model, nullptr, nullptr, runtime.world_ptr());
    const std::string dir = argv[2];
    if (mode == "checkpoint-load") {
      std::printf("loaded client state %s\n", init.engine->load_checkpoint(dir).c_str());
      return 0;
    }
    init.engine->save_checkpoint(dir, "a", R"({"tag": "a"})");
    setenv("FATHOM_TEST_CRASH_DURING_SAVE", argv[3], 1);
    init.engine->save_checkpoint(dir, "b", R"({"tag": "b"})");
  } else if (mode == "zero3-uneven-forward") {
    models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
    auto model = std::make_shared<models::Decoder>(c);
    const Config config = Config::from_string(detail::concat(R"({"train_batch_size": )", world.size(), R"(,
        "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
        "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})"));
    Initialized init = initialize(config, model, nullptr, nullptr, runtime.world_ptr());
    const Tensor tokens = Tensor::zeros({1, 8}, DType::I64);
    if (world.rank() == 0) {  // e.g. an evaluation only rank 0 runs
      autograd::NoGradGuard no_grad;
      (*model)(autograd::Variable(tokens));
    }
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(tokens)), tokens));
    init.engine->step();
  } else if (mode == "pipeline-stuck" || mode == "pipeline-mismatch") {
    const parallel::ProcessGroups groups = runtime.groups(/*pipeline=*/2, /*tensor=*/1);
    auto stage = std::make_shared<parallel::PipelineModule>(
        std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny")), groups);
    const int micro_batches = mode == "pipeline-mismatch" && groups.coord().pipeline == 1 ? 4 : 2;
    Initialized init = initialize(
        Config::from_string(detail::concat(R"({"train_batch_size": )", micro_batches, R"(, "gradient_accumulation_steps": )",
                                           micro_batches, R"(, "pipeline": {"stages": 2}, "optimizer": {"type": "SGD", )"
                                           R"("params": {"lr": 0.1}}})")),
        stage, nullptr, nullptr, groups);
    if (mode == "pipeline-stuck" && groups.coord().pipeline == 1) std::this_thread::sleep_for(std::chrono::seconds(600));
    init.engine->train_batch([] {
      return Batch{Tensor::zeros({1, 8}, DType::I64), Tensor::zeros({1, 8}, DType::I64), Tensor::zeros({1}, DType::I64)};
    });
  } else if (mode == "hang") {
    if (world.rank() == 0) world.all_reduce(values);
    else std::this_thread::sleep_for(std::chrono::seconds(600));
  }
  return 0;
}
