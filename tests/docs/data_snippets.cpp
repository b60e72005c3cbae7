// The C++ snippet of docs/data.md, verbatim (docs_check compares it); "docs:skip" lines are the
// scaffolding the reader does not see. It is compiled, not run: a GPT-2-sized batch on a real
// FineWeb shard is not a unit test (the loader's behaviour is tested in tests/engine/data/test_data.cpp).
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>  // docs:skip
#include "engine/data/loader.h"
#include "engine/data/token_dataset.h"
using namespace fathom;

[[maybe_unused]] static void data_loader_tour(nn::Module& model, int64_t rank, int64_t world, int epochs) {  // docs:skip
auto train = std::make_shared<TokenDataset>(
    TokenDataset::from_file("fineweb_train_000001.bin", /*block_size=*/1024, {.vocab_size = 50257}));
DataLoader loader(train, {.micro_batch_size = 8, .gradient_accumulation_steps = 4,
                          .dp_rank = rank, .dp_world_size = world, .seed = 1337});
for (int epoch = 0; epoch < epochs; ++epoch)
  for (const Batch& batch : loader) {
    // batch.inputs [8, 1024] i64, batch.targets [8, 1024] i64, batch.sample_index [8] i64
    auto logits = model.forward(autograd::Variable(batch.inputs));
    auto loss = nn::cross_entropy(logits, batch.targets, batch.loss_normaliser);
    loss.backward();  // or engine->backward(loss); engine->step();
  }
}  // docs:skip
