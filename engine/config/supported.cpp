// Config::check_supported: what a config may enable but this build cannot run yet. Parsing
// accepts these (a config written for a later Fathom still loads and prints); the engine calls
// check_supported before it builds anything. Each feature's issue flips its line below.
#include "engine/config/config.h"
#include "engine/config/error.h"

namespace fathom {
namespace {

constexpr bool kFp16Built = true;
constexpr bool kBf16Built = true;

}  // namespace

void Config::check_supported() const {
  auto fail = [&](const std::string& path, const std::string& what) { throw_config_error({source, 0, path}, what); };
  if (fp16.enabled && !kFp16Built)
    fail("fp16.enabled", "true is not supported yet (fp16 mixed precision arrives with its issue); use false");
  if (bf16.enabled && !kBf16Built)
    fail("bf16.enabled", "true is not supported yet (bf16 mixed precision arrives with its issue); use false");
}

}  // namespace fathom
