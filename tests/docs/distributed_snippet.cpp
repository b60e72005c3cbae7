// The program of docs/distributed.md, verbatim (docs_check compares it); "docs:skip" lines are the
// scaffolding the reader does not see: a model and a dataset. The test runs it at 1 and 2 ranks
// in tests/docs/data, which holds its ds_config.json.
#include <fathom.h>
#include <iostream>  // docs:skip

struct MyModel : fathom::nn::Module {  // docs:skip
  std::shared_ptr<fathom::nn::Linear> proj = register_module("proj", std::make_shared<fathom::nn::Linear>(4, 3));  // docs:skip
  fathom::autograd::Variable forward(const fathom::autograd::Variable& x) override { return (*proj)(x); }  // docs:skip
};  // docs:skip
static std::shared_ptr<fathom::Dataset> make_dataset() {  // docs:skip
  fathom::Generator gen(5);  // docs:skip
  std::vector<int64_t> labels(16);  // docs:skip
  for (int i = 0; i < 16; ++i) labels[i] = i % 3;  // docs:skip
  return std::make_shared<fathom::TensorDataset>(fathom::uniform({16, 4}, gen), fathom::Tensor::from_vector(labels));  // docs:skip
}  // docs:skip

int main(int argc, char** argv) {
  fathom::parallel::Runtime runtime(argc, argv);   // MPI up; rank, local rank, GPU, NCCL
  auto config = fathom::Config::from_file("ds_config.json");
  auto model = std::make_shared<MyModel>();
  auto [engine, optimizer, loader, scheduler] =
      fathom::initialize(config, model, nullptr, make_dataset(), runtime.groups());
  for (auto& batch : *loader) {
    auto out = (*engine)(fathom::autograd::Variable(batch.inputs), batch.sample_index);
    engine->backward(fathom::nn::cross_entropy(out, batch.targets, batch.loss_normaliser));
    engine->step();
  }
  if (runtime.rank() == 0) std::cout << "distributed.md: " << engine->global_steps() << " steps\n";  // docs:skip
}
