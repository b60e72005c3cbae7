// The C++ snippet of docs/config.md, verbatim (docs_check compares it); "docs:skip" lines are the
// scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>  // docs:skip
#include "docs_sandbox.h"  // docs:skip

TEST_CASE("config.md: reading a config") {  // docs:skip
  fathom::docs_test::Sandbox sandbox("config");  // docs:skip
  fathom::docs_test::Sandbox::write("ds_config.json", R"({"train_batch_size": 8, "gradient_accumulation_steps": 2})");  // docs:skip
  const int64_t dp_world_size = 2;  // docs:skip
fathom::Config config = fathom::Config::from_file("ds_config.json");  // or .yaml / .yml
config.check_supported();        // the engine does this: refuses what is not built yet
config.resolve_batch(dp_world_size);
std::string used = config.to_json();  // the config as used (fathom-train writes it to its out dir)
  CHECK(config.batch.train_micro_batch_size_per_gpu == 2);  // docs:skip
  CHECK(used.find("\"train_micro_batch_size_per_gpu\": 2") != std::string::npos);  // docs:skip
}  // docs:skip
