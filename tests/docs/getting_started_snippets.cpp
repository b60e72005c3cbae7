// The C++ snippets of docs/getting_started.md, verbatim (docs_check compares them); "docs:skip"
// lines are the scaffolding the reader does not see: the config and token file the program reads.
#include <catch2/catch.hpp>  // docs:skip
#include "docs_sandbox.h"  // docs:skip
#include "engine/data/token_file.h"  // docs:skip
#include <fathom.h>

TEST_CASE("getting_started.md: the engine from your own program") {  // docs:skip
  fathom::docs_test::Sandbox sandbox("getting_started");  // docs:skip
  fathom::docs_test::Sandbox::write("ds_config.json", R"({"train_batch_size": 2,  // docs:skip
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})");  // docs:skip
  std::vector<uint16_t> tokens(4 * 129 + 1);  // docs:skip
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i % 97);  // docs:skip
  fathom::write_token_file("train.bin", tokens, fathom::TokenFileFormat::Auto);  // docs:skip
auto config = fathom::Config::from_file("ds_config.json");
auto model = std::make_shared<fathom::models::Decoder>(fathom::models::DecoderConfig::preset("gpt2-small"));
auto dataset = std::make_shared<fathom::TokenDataset>(
    fathom::TokenDataset::from_file("train.bin", /*block_size=*/128));
auto [engine, optimizer, loader, scheduler] = fathom::initialize(config, model, nullptr, dataset);
for (const auto& batch : *loader) {
  auto logits = (*engine)(fathom::autograd::Variable(batch.inputs), batch.sample_index);
  engine->backward(fathom::nn::cross_entropy(logits, batch.targets, batch.loss_normaliser));
  engine->step();   // optimizer, schedule and zero_grad at accumulation boundaries
}
  CHECK(engine->global_steps() == 2);  // docs:skip
auto it = loader->begin();
const fathom::StepReport& report = engine->train_batch([&] { fathom::Batch b = *it; ++it; return b; });
  CHECK(std::isfinite(report.loss));  // docs:skip
  CHECK(engine->global_steps() == 3);  // docs:skip
}  // docs:skip
