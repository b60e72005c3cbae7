// The C++ snippets of docs/nn.md, verbatim (docs_check compares them); "docs:skip" lines are the
// scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <iostream>  // docs:skip
#include "zero_partitioning.h"  // docs:skip
#include <fathom.h>
namespace nn = fathom::nn;
using fathom::autograd::Variable;

namespace {  // docs:skip
struct MyModel : nn::Module {
  std::shared_ptr<nn::Linear> hidden, out;
  std::shared_ptr<nn::Dropout> drop;
  MyModel() {
    hidden = register_module("hidden", std::make_shared<nn::Linear>(784, 256));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.1));
    out = register_module("out", std::make_shared<nn::Linear>(256, 10));
  }
  Variable forward(const Variable& x) override {
    return (*out)((*drop)(fathom::autograd::relu((*hidden)(x))));
  }
};
}  // namespace  // docs:skip

TEST_CASE("nn.md: a model of your own") {  // docs:skip
  using namespace fathom;  // docs:skip
  Generator gen(3);  // docs:skip
  Variable x(uniform({4, 784}, gen));  // docs:skip
  Tensor labels = Tensor::from_vector<int64_t>({1, 2, 3, 4});  // docs:skip
auto model = std::make_shared<MyModel>();
for (auto& [name, p] : model->named_parameters()) std::cout << name << " " << shape_str(p.sizes()) << "\n";
// hidden.weight [256, 784], hidden.bias [256], out.weight [10, 256], out.bias [10]
Variable loss = nn::cross_entropy((*model)(x), labels);
loss.backward();
  CHECK(model->named_parameters().front().first == "hidden.weight");  // docs:skip
  CHECK(model->named_parameters().front().second.grad().defined());  // docs:skip
}  // docs:skip

TEST_CASE("nn.md: the decoder") {  // docs:skip
  fathom::Tensor token_ids = fathom::Tensor::zeros({2, 16}, fathom::DType::I64);  // docs:skip
using namespace fathom::models;
DecoderConfig config = DecoderConfig::preset("gpt2-small");  // gpt2-*, llama-* (docs/models.md)
config.dropout = 0.1;
Decoder model(config, /*seed=*/1337);            // GPT-2's initialisation for gpt2-*
Variable logits = model(Variable(token_ids));    // (B, T) i64 -> (B, T, vocab)
  CHECK(logits.sizes() == fathom::Shape{2, 16, config.vocab_size});  // docs:skip
}  // docs:skip

TEST_CASE("offload.md: building a model larger than memory") {  // docs:skip
  using namespace fathom;  // docs:skip
  models::DecoderConfig config = models::DecoderConfig::preset("llama-tiny");  // docs:skip
  const uint64_t seed = 5;  // docs:skip
  const Config config_with_stage_3 = Config::from_string(R"({"train_batch_size": 1, "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}, "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})");  // docs:skip
  std::shared_ptr<const Dataset> data;  // docs:skip
std::shared_ptr<models::Decoder> model;
{
  nn::DeferredInit deferred;                      // parameters released as modules are built
  model = std::make_shared<models::Decoder>(config, seed);
  // models::load_hf_weights(*model, "Llama-3.1-8B/");   // optional: read shard by shard
}
Initialized init = initialize(config_with_stage_3, model, nullptr, data);
  CHECK(init.engine->consolidated_state_dict().size() == model->named_parameters().size());  // docs:skip
  fathom::testing::require_stage3_partitioned(*init.engine);  // docs:skip
}  // docs:skip
