// GPT on the GPU: the full forward and the KV-cache decoding of fathom-generate equal the CPU's.
#include "core/generator.h"
#include "models/gpt.h"
#include "models/gpt_inference.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::models;

TEST_CASE("GPT forward and KV-cache decoding on the GPU equal the CPU", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const GPTConfig config = GPTConfig::preset("tiny");
  GPT cpu(config, 11), gpu(config, 11);
  cpu.eval();
  gpu.eval();
  gpu.to(Device::cuda(0));
  const std::vector<int64_t> prompt = {5, 17, 200, 3, 3, 99, 42};
  const Tensor tokens = Tensor::from_vector<int64_t>(prompt, {1, static_cast<int64_t>(prompt.size())});
  const Tensor expected = cpu(autograd::Variable(tokens)).data();
  const Tensor got = gpu(autograd::Variable(tokens.to(Device::cuda(0)))).data();
  FATHOM_REQUIRE_CLOSE(got.to(kCPU), expected, 1e-5, 1e-5);

  GPTInference on_cpu(cpu), on_gpu(gpu);
  for (int64_t token : prompt) {
    const Tensor next = Tensor::from_vector<int64_t>({token}, {1, 1});
    const Tensor a = on_gpu.feed(next);  // host tokens are moved to the model's device
    REQUIRE(a.device() == Device::cuda(0));
    FATHOM_REQUIRE_CLOSE(a.to(kCPU), on_cpu.feed(next), 1e-5, 1e-5);
  }
}
