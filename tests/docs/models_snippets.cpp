// The C++ snippets of docs/models.md, verbatim (docs_check compares them); "docs:skip" lines are
// the scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>  // docs:skip
#include "docs_sandbox.h"  // docs:skip
#include "models/generation.h"
#include "models/model_spec.h"
using namespace fathom;

TEST_CASE("models.md: a Hugging Face folder in and out") {  // docs:skip
  docs_test::Sandbox sandbox("models");  // docs:skip
  {  // docs:skip: a folder as transformers' save_pretrained writes one
    const models::ModelSpec tiny = models::ModelSpec::preset("qwen2", "tiny");  // docs:skip
    tiny.save(tiny.build(1)->state_dict(), "Qwen2-tiny");  // docs:skip
  }  // docs:skip
models::ModelSpec spec = models::ModelSpec::from_folder("Qwen2-tiny");  // its config.json
std::shared_ptr<nn::Module> model = spec.build(/*seed=*/0);
spec.load(*model, "Qwen2-tiny");  // model.safetensors, or the shards its index names
// ... train it with an Engine (docs/getting_started.md) ...
spec.save(model->state_dict(), "Qwen2-tiny-finetuned");  // config.json + safetensors

auto& decoder = dynamic_cast<models::Decoder&>(*model);
Generator gen(0);
models::Generated out = models::generate(decoder, Tensor::from_vector<int64_t>({5, 6, 7}, {1, 3}),
                                         {.max_new_tokens = 8, .temperature = 0}, gen);
  CHECK(spec.architecture() == "qwen2");  // docs:skip
  CHECK(out.sequences.sizes() == Shape{1, 11});  // docs:skip
  CHECK(models::ModelSpec::from_folder("Qwen2-tiny-finetuned").describe() == spec.describe());  // docs:skip
}  // docs:skip
