// Tensor parallelism's device path (the GPU check's tp = 1 row; under emulation in CI): GPT with
// tensor parallelism over a one-rank group, with and without sequence parallelism, on the GPU —
// the vocabulary-parallel embedding and cross-entropy, the column- and row-parallel layers, the
// region ops on device tensors — gives the unsplit GPT's loss and gradients there.
#include "models/gpt.h"
#include "models/gpt_tensor_parallel.h"
#include "nn/loss.h"
#include "parallel/local_communicator.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;

TEST_CASE("GPT with tensor parallelism at tp 1 on the GPU equals GPT, loss and gradients", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  models::GPTConfig config;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 16;
  config.vocab_size = 150;  // padded to 256 rows
  config.block_size = 8;
  for (const bool sequence_parallel : {false, true}) {
    INFO("sequence parallel " << sequence_parallel);
    models::GPT full(config, /*seed=*/5);
    models::TensorParallelGPT split(config, std::make_shared<parallel::LocalCommunicator>(),
                                    {.sequence_parallel = sequence_parallel});
    split.load_full(full);
    full.to(gpu);
    split.to(gpu);
    std::vector<int64_t> ids(2 * 8), next(2 * 8);
    for (int64_t i = 0; i < 16; ++i) ids[i] = (i * 37 + 11) % config.vocab_size, next[i] = (i * 53 + 2) % 150;
    const autograd::Variable idx(Tensor::from_vector(ids, {2, 8}).to(gpu));
    const Tensor targets = Tensor::from_vector(next, {2, 8}).to(gpu);
    const autograd::Variable expected = nn::cross_entropy(full.forward(idx), targets);
    const autograd::Variable loss = split.loss(idx, targets);
    REQUIRE(loss.data().device() == gpu);
    expected.backward();
    loss.backward();
    FATHOM_REQUIRE_CLOSE(loss.data().to(kCPU), expected.data().to(kCPU), 1e-5, 1e-5);
    const Tensor table_grad = split.transformer->wte->weight.grad().to(kCPU);
    FATHOM_REQUIRE_CLOSE(table_grad.narrow(0, 0, 150).contiguous(), full.transformer->wte->weight.grad().to(kCPU), 1e-5,
                         1e-5);
    FATHOM_REQUIRE_CLOSE(split.transformer->ln_f->weight.grad().to(kCPU),
                         full.transformer->ln_f->weight.grad().to(kCPU), 1e-5, 1e-5);
  }
}
