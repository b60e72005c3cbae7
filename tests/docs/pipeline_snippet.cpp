// The program of docs/pipeline_parallel.md, verbatim (docs_check compares it); "docs:skip" lines
// are the scaffolding the reader does not see: a token dataset. The test runs it at 2 ranks.
#include <fathom.h>
#include <iostream>  // docs:skip

static std::shared_ptr<fathom::TokenDataset> my_tokens() {  // docs:skip
  std::vector<uint16_t> tokens(64 * 32 + 1);  // docs:skip
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>((i * 7 + 3) % 256);  // docs:skip
  return std::make_shared<fathom::TokenDataset>(fathom::TokenDataset::from_tokens(tokens, 32, 256));  // docs:skip
}  // docs:skip

int main(int argc, char** argv) {
  fathom::parallel::Runtime runtime(argc, argv);
  auto config = fathom::Config::from_string(R"({"train_batch_size": 8, "gradient_accumulation_steps": 4,
      "pipeline": {"stages": 2, "schedule": "1f1b"}, "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}})");
  auto groups = runtime.groups(/*pipeline=*/2, /*tensor=*/1);      // 2 stages x (world / 2) data ranks
  auto model = std::make_shared<fathom::models::Decoder>(fathom::models::DecoderConfig::preset("llama-tiny"));
  auto stage = std::make_shared<fathom::parallel::PipelineModule>(
      model, groups, fathom::parallel::PipelineOptions{.partition = "type:DecoderLayer"});
  auto [engine, optimizer, loader, scheduler] = fathom::initialize(config, stage, nullptr, my_tokens(), groups);
  auto position = loader->begin();
  for (int step = 0; step < 4; ++step)
    engine->train_batch([&] {                       // called by the first and last stages only
      fathom::Batch batch = *position;
      ++position;
      return batch;
    });
  if (runtime.rank() == 0) std::cout << "pipeline_parallel.md: " << engine->global_steps() << " steps\n";  // docs:skip
}
