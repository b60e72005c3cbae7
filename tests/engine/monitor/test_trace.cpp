// The step timeline: the Chrome trace file a ZeRO-2 run writes, loaded back — every event
// well-formed, the spans of every track nested, each rank's phases, module spans and
// collectives present for the traced steps only.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/json.h"
#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "mpi_test_util.h"
#include "nn/loss.h"
#include "test_util.h"

using namespace fathom;
using fathom::testing::runtime;
namespace fs = std::filesystem;

namespace {
struct Span {
  std::string name, category;
  double ts = 0, dur = 0;
  std::map<std::string, std::string> args;
};

// Spans sorted by start (longer first on a tie) must each end within the one enclosing them.
std::string first_overlap(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
  });
  std::vector<const Span*> open;
  for (const Span& s : spans) {
    while (!open.empty() && open.back()->ts + open.back()->dur <= s.ts) open.pop_back();
    if (!open.empty() && s.ts + s.dur > open.back()->ts + open.back()->dur + 1e-3)
      return s.name + " [" + std::to_string(s.ts) + ", +" + std::to_string(s.dur) + "] crosses the end of " +
             open.back()->name;
    open.push_back(&s);
  }
  return "";
}
}  // namespace

TEST_CASE("the trace of steps 2-3 loads, every event is well-formed and every track's spans nest", "[trace]") {
  const auto& world = runtime().world_ptr();
  const int n = world->size();
  const fs::path dir = fs::temp_directory_path() / ("fathom_trace_np" + std::to_string(n));
  if (world->rank() == 0) fs::remove_all(dir);
  world->barrier();
  const Config config = Config::from_string(detail::concat(
      R"({"train_batch_size": )", 4 * n, R"(, "train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW"},
      "zero_optimization": {"stage": 2, "reduce_bucket_size": 5000},
      "trace": {"enabled": true, "output_path": ")", dir.string(), R"(", "steps": [2, 3]}})"));
  models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
  c.vocab_size = 64;
  c.max_positions = 16;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 16 * n * 17 + 1; ++i) tokens.push_back(static_cast<uint16_t>(i * 3 % 61));
  auto data = std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, 16, 64));
  Initialized init = initialize(config, std::make_shared<models::Decoder>(c, 1), nullptr, data, world);
  for (const Batch& batch : *init.loader) {
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs)), batch.targets,
                                            batch.loss_normaliser));
    init.engine->step();
    if (init.engine->global_steps() == 4) break;
  }
  REQUIRE(init.engine->global_steps() == 4);
  world->barrier();
  if (world->rank() != 0) return;

  std::stringstream text;
  text << std::ifstream(dir / "trace.json").rdbuf();
  const JsonValue trace = parse_json(text.str(), "trace.json");
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> tracks;
  std::map<std::pair<int64_t, int64_t>, std::string> track_names;
  for (const JsonValue& event : trace.at("traceEvents").as_array()) {
    const std::string ph = event.at("ph").as_string();
    const int64_t pid = event.at("pid").as_int64(), tid = event.at("tid").as_int64();
    INFO(event.at("name").as_string());
    CHECK((pid >= 0 && pid < n));
    if (ph == "M") {
      if (event.at("name").as_string() == "thread_name") track_names[{pid, tid}] = event.at("args").at("name").as_string();
      continue;
    }
    REQUIRE(ph == "X");
    Span span{event.at("name").as_string(), event.at("cat").as_string(), event.at("ts").as_double(),
              event.at("dur").as_double(), {}};
    for (const auto& [key, value] : event.at("args").as_object()) span.args[key] = value.as_string();
    CHECK(!span.name.empty());
    CHECK(span.ts >= 0);
    CHECK(span.dur >= 0);
    CHECK(tid >= 1);
    tracks[{pid, tid}].push_back(span);
  }
  for (const auto& [track, spans] : tracks) {
    INFO("rank " << track.first << ", track " << track_names[track]);
    CHECK(track_names.count(track) == 1);  // every track is named
    CHECK(first_overlap(spans) == "");
  }
  for (int rank = 0; rank < n; ++rank) {
    INFO("rank " << rank);
    const std::vector<Span>& compute = tracks[{rank, 1}];
    CHECK(track_names[{rank, 1}] == "compute (cpu)");
    std::map<std::string, int> phases;
    int attention_forward = 0, attention_backward = 0;
    for (const Span& s : compute) {
      if (s.category == "phase") {
        ++phases[s.name + " " + s.args.at("step")];
      } else if (s.name == "model.layers.0.self_attn (DecoderAttention)") {
        ++(s.category == "forward" ? attention_forward : attention_backward);
      }
    }
    // Two micro-batches a step; steps 2 and 3 only.
    const std::map<std::string, int> expected = {{"forward 2", 2}, {"backward 2", 2}, {"optimizer step 2", 1},
                                                 {"forward 3", 2}, {"backward 3", 2}, {"optimizer step 3", 1}};
    CHECK(phases == expected);
    CHECK(attention_forward == 4);
    CHECK(attention_backward == 4);
    if (n > 1) {  // ZeRO-2's bucket reductions on the data group's track
      int reductions = 0;
      for (const auto& [track, spans] : tracks)
        if (track.first == rank && track_names[track] == "communication: world")
          for (const Span& s : spans) reductions += s.name == "reduce_scatter_v";
      CHECK(reductions > 0);
    }
  }
}
