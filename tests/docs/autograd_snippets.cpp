// The C++ snippets of docs/autograd.md, verbatim (docs_check compares them); "docs:skip" lines
// are the scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>  // docs:skip
#include <vector>  // docs:skip

namespace {  // docs:skip
struct Bucket {  // docs:skip
  std::vector<fathom::autograd::Variable> ready;  // docs:skip
  int flushes = 0;  // docs:skip
  void add(const fathom::autograd::Variable& v) { ready.push_back(v); }  // docs:skip
  void flush() { ++flushes; }  // docs:skip
};  // docs:skip
}  // namespace  // docs:skip

using namespace fathom;
using namespace fathom::autograd;

TEST_CASE("autograd.md: variables") {  // docs:skip
  Generator gen(7);  // docs:skip
  Tensor new_tensor = Tensor::full({3}, 2.0f);  // docs:skip
  Tensor flat_buffer = Tensor::zeros({8});  // docs:skip
  const int64_t offset = 4;  // docs:skip
Variable w(Tensor::ones({3}), /*requires_grad=*/true, "w");   // a leaf parameter
Variable x(uniform({3}, gen));                                  // an input: no gradient
Variable loss = sum(tanh(x * w) + x);                           // records the graph
loss.backward();                                                // w.grad() now holds dL/dw
{
  NoGradGuard no_grad;                                          // no graph inside this scope
  Variable y = x * w;
  CHECK_FALSE(y.requires_grad());  // docs:skip
}
  CHECK(w.grad().defined());  // docs:skip
Variable frozen = loss.detach();                                // same data, cut from the graph
w.set_data(new_tensor);                                         // swap the tensor (ZeRO-3), keep graph links
w.set_grad(flat_buffer.narrow(0, offset, 3));                   // gradient as a view into a bucket
  CHECK_FALSE(frozen.requires_grad());  // docs:skip
  CHECK(w.data().to_vector<float>() == std::vector<float>{2, 2, 2});  // docs:skip
}  // docs:skip

TEST_CASE("autograd.md: a custom node") {  // docs:skip
  Variable x(Tensor::from_vector<float>({1, 2}), true);  // docs:skip
struct Cube final : Function {
  std::string name() const override { return "cube"; }
  TensorList forward(const TensorList& in) override {
    save_for_backward({in[0]});
    return {mul(mul(in[0], in[0]), in[0])};
  }
  TensorList backward(const TensorList& grads) override {
    const Tensor x = saved_tensors()[0];
    return {mul(grads[0], mul(mul(x, x), 3.0))};
  }
};
Variable y = apply_function(std::make_shared<Cube>(), {x})[0];
  sum(y).backward();  // docs:skip
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, 12});  // docs:skip
}  // docs:skip

TEST_CASE("autograd.md: a grad-ready hook") {  // docs:skip
  Variable w(Tensor::ones({2}), true);  // docs:skip
  Bucket bucket;  // docs:skip
HookHandle hook = w.add_grad_ready_hook([&](const Variable& v) {  // removed with `hook`
  bucket.add(v);                                           // v.grad() is final here
  queue_backward_callback([&] { bucket.flush(); });        // once everything is done
});
  sum(mul(w, w)).backward();  // docs:skip
  CHECK(bucket.ready.size() == 1);  // docs:skip
  CHECK(bucket.flushes == 1);  // docs:skip
}  // docs:skip

TEST_CASE("autograd.md: activation checkpointing") {  // docs:skip
  Variable x(Tensor::ones({4}), true);  // docs:skip
  std::vector<std::function<Variable(const Variable&)>> blocks(3, [](const Variable& v) { return tanh(v); });  // docs:skip
VariableList h = {x};
for (auto& block : blocks)
  h = checkpoint([&](const VariableList& in) { return VariableList{block(in[0])}; }, h);
  sum(h[0]).backward();  // docs:skip
  CHECK(x.grad().defined());  // docs:skip
}  // docs:skip

TEST_CASE("autograd.md: activation checkpointing of a model") {  // docs:skip
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"));  // docs:skip
model->set_checkpointing(nn::checkpoint_layers_of_type(*model, "DecoderLayer"));
  REQUIRE(model->checkpointing() != nullptr);  // docs:skip
  CHECK(model->checkpointing()->recompute(1));  // docs:skip
  CHECK_FALSE(model->checkpointing()->recompute(0));  // docs:skip
}  // docs:skip
