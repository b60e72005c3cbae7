// The C++ snippet of docs/checkpoints.md, verbatim (docs_check compares it); "docs:skip" lines are
// the scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>  // docs:skip
#include "docs_sandbox.h"  // docs:skip

TEST_CASE("checkpoints.md: save and load") {  // docs:skip
  fathom::docs_test::Sandbox sandbox("checkpoints");  // docs:skip
  auto config = fathom::Config::from_string(R"({"train_batch_size": 1, "optimizer": {"type": "Adam"}})");  // docs:skip
  auto engine = fathom::initialize(config, std::make_shared<fathom::nn::Linear>(2, 2)).engine;  // docs:skip
engine->save_checkpoint("runs/a/ckpt");                       // tag "global_step<N>", latest -> it
engine->save_checkpoint("runs/a/ckpt", "best", R"({"epoch": 3})");
std::string client = engine->load_checkpoint("runs/a/ckpt"); // the tag `latest` names
engine->load_checkpoint("runs/a/ckpt", "best");
  CHECK(client.find("\"epoch\": 3") != std::string::npos);  // docs:skip
}  // docs:skip
