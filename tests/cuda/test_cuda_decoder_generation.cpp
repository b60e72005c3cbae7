// The decoder on the GPU: the full forward and the KV-cache decoding of fathom-generate equal the
// CPU's, for GPT-2's configuration and for Llama's (GQA, RoPE, SwiGLU, untied).
#include "core/generator.h"
#include "models/decoder.h"
#include "models/generation.h"
#include "require_cuda.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::models;

TEST_CASE("decoder forward and KV-cache decoding on the GPU equal the CPU", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    INFO(preset);
    const DecoderConfig config = DecoderConfig::preset(preset);
    Decoder cpu(config, 11), gpu(config, 11);
    cpu.eval();
    gpu.eval();
    gpu.to(Device::cuda(0));
    const std::vector<int64_t> prompt = {5, 17, 200, 3, 3, 99, 42};
    const Tensor tokens = Tensor::from_vector<int64_t>(prompt, {1, static_cast<int64_t>(prompt.size())});
    const Tensor expected = cpu(autograd::Variable(tokens)).data();
    const Tensor got = gpu(autograd::Variable(tokens.to(Device::cuda(0)))).data();
    FATHOM_REQUIRE_CLOSE(got.to(kCPU), expected, 1e-5, 1e-5);

    KVCache on_cpu = cpu.make_cache(1), on_gpu = gpu.make_cache(1);
    for (int64_t token : prompt) {
      const Tensor next = Tensor::from_vector<int64_t>({token}, {1, 1});
      const Tensor a = next_token_logits(gpu, on_gpu, next);  // host tokens are moved to the model's device
      REQUIRE(a.device() == Device::cuda(0));
      FATHOM_REQUIRE_CLOSE(a.to(kCPU), next_token_logits(cpu, on_cpu, next), 1e-5, 1e-5);
    }
  }
}
