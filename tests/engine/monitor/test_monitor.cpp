// Monitors: TensorBoard event files (framing, CRC-32C, the hand-encoded protos) and CSV files,
// as the engine writes them during training.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/monitor/csv_monitor.h"
#include "engine/initialize.h"
#include "engine/monitor/tensorboard_events.h"
#include "engine/monitor/tensorboard_monitor.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "nn/loss.h"
#include "test_util.h"

using namespace fathom;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("fathom_monitor_" + name);
  fs::remove_all(dir);
  return dir;
}

// A tiny GPT (vocabulary 64, block 16) on 8 samples of a token pattern with the given stride.
Initialized tiny_gpt_job(const Config& config, int stride) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 8 * 17 + 1; ++i) tokens.push_back(static_cast<uint16_t>(i * stride % 61));
  auto data = std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, 16, 64));
  models::DecoderConfig c = models::DecoderConfig::preset("gpt2-tiny");
  c.vocab_size = 64;
  c.max_positions = 16;
  return initialize(config, std::make_shared<models::Decoder>(c, 1), nullptr, data);
}

}  // namespace

TEST_CASE("CRC-32C has its check value; TFRecord masks it", "[engine]") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  const uint32_t crc = crc32c("abc");
  CHECK(masked_crc32c("abc") == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST_CASE("a TensorBoard file written is read back: file version, tags, steps, values", "[engine]") {
  const fs::path dir = fresh_dir("roundtrip");
  std::string path;
  {
    TensorBoardMonitor monitor(dir.string());
    path = monitor.path();
    monitor.write_events({{"Train/Samples/train_loss", 2.5, 16}, {"Train/Samples/lr", 3e-4, 16}});
    monitor.write_events({{"Train/Samples/train_loss", 2.25, 32}});
  }
  CHECK(fs::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  const TensorBoardFile file = read_tensorboard_file(path);
  CHECK(file.file_version == "brain.Event:2");
  REQUIRE(file.scalars.size() == 3);
  CHECK(file.scalars[0].tag == "Train/Samples/train_loss");
  CHECK(file.scalars[0].step == 16);
  CHECK(file.scalars[0].value == 2.5f);
  CHECK(file.scalars[1].value == 3e-4f);
  CHECK(file.scalars[2].step == 32);
  CHECK(file.scalars[2].wall_time >= file.scalars[0].wall_time);
}

TEST_CASE("a TensorBoard file from TensorBoard's own writer is decoded", "[engine]") {
  // Written once by the tensorboard package's EventFileWriter (tests/data/make_tensorboard_events.py).
  const TensorBoardFile file = read_tensorboard_file(FATHOM_TEST_DATA_DIR "/tensorboard_reference.tfevents");
  CHECK(file.file_version == "brain.Event:2");
  REQUIRE(file.scalars.size() == 3);
  CHECK(file.scalars[0].tag == "Train/Samples/train_loss");
  CHECK(file.scalars[0].step == 8);
  CHECK(file.scalars[0].value == 4.5f);
  CHECK(file.scalars[1].tag == "Train/Samples/lr");
  CHECK(file.scalars[1].value == 0.001f);
  CHECK(file.scalars[2].step == 16);
  CHECK(file.scalars[2].value == 4.25f);
}

TEST_CASE("a corrupt TensorBoard file is an error naming the record", "[engine]") {
  const fs::path dir = fresh_dir("corrupt");
  std::string path;
  {
    TensorBoardMonitor monitor(dir.string());
    path = monitor.path();
    monitor.write_events({{"x", 1, 1}});
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() - 6] ^= 1;  // inside the last record's data
  std::ofstream(path, std::ios::binary) << bytes;
  CHECK(testing::error_of([&] { read_tensorboard_file(path); }).find("fails its data CRC (the file is corrupt)") !=
        std::string::npos);
}

TEST_CASE("CSV monitor: one file per tag, one header, appended across runs", "[engine]") {
  const fs::path dir = fresh_dir("csv");
  CsvMonitor(dir.string()).write_events({{"Train/Samples/train_loss", 2.5, 16}});
  CsvMonitor(dir.string()).write_events({{"Train/Samples/train_loss", 0.1, 32}});  // a resumed run
  CHECK(CsvMonitor::file_name("Train/Samples/train_loss") == "Train_Samples_train_loss.csv");
  CHECK(lines_of(dir / "Train_Samples_train_loss.csv") ==
        std::vector<std::string>{"step,train_loss", "16,2.5", "32,0.1"});
}

TEST_CASE("the engine writes its losses and lr to the configured monitors at every step", "[engine]") {
  const fs::path dir = fresh_dir("engine");
  const std::string config = R"({"train_batch_size": 4, "gradient_accumulation_steps": 2, "wall_clock_breakdown": true,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
      "tensorboard": {"enabled": true, "output_path": ")" +
                             dir.string() + R"(", "job_name": "tb"},
      "csv_monitor": {"enabled": true, "output_path": ")" +
                             dir.string() + R"(", "job_name": "csv"}})";
  Initialized init = tiny_gpt_job(Config::from_string(config), 7);
  std::vector<double> losses;
  for (const Batch& batch : *init.loader) {
    init.engine->backward(
        nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs)), batch.targets, batch.loss_normaliser));
    const bool boundary = init.engine->is_gradient_accumulation_boundary();
    init.engine->step();
    if (boundary) losses.push_back(init.engine->last_report().loss);
  }
  REQUIRE(losses.size() == 2);
  init.engine.reset();  // closes the TensorBoard file

  const std::vector<std::string> csv = lines_of(dir / "csv" / "Train_Samples_train_loss.csv");
  REQUIRE(csv.size() == 3);
  CHECK(csv[0] == "step,train_loss");
  for (size_t i = 0; i < losses.size(); ++i) {
    CHECK(csv[i + 1].substr(0, csv[i + 1].find(',')) == std::to_string(4 * (i + 1)));  // global samples
    CHECK(std::stod(csv[i + 1].substr(csv[i + 1].find(',') + 1)) == losses[i]);        // exactly the reported loss
  }
  CHECK(fs::exists(dir / "csv" / "Train_Samples_lr.csv"));
  CHECK(fs::exists(dir / "csv" / "Train_Samples_elapsed_time_ms_forward.csv"));

  std::vector<fs::path> event_files;
  for (const auto& entry : fs::directory_iterator(dir / "tb")) event_files.push_back(entry.path());
  REQUIRE(event_files.size() == 1);
  const TensorBoardFile file = read_tensorboard_file(event_files[0].string());
  std::vector<float> tb_losses;
  for (const TensorBoardScalar& s : file.scalars)
    if (s.tag == "Train/Samples/train_loss") tb_losses.push_back(s.value);
  CHECK(tb_losses == std::vector<float>{static_cast<float>(losses[0]), static_cast<float>(losses[1])});
}

TEST_CASE("wall_clock_breakdown and memory_breakdown: DeepSpeed's timer lines, and the tags after each phase", "[engine]") {
  const Config config = Config::from_string(R"({"train_batch_size": 2, "train_micro_batch_size_per_gpu": 1, "steps_per_print": 2,
      "wall_clock_breakdown": true, "memory_breakdown": true, "optimizer": {"type": "AdamW"}})");
  CHECK(config.memory_breakdown);
  Initialized init = tiny_gpt_job(config, 5);
  std::vector<StepReport> reports;
  init.engine->on_step([&](const StepReport& r) { reports.push_back(r); });
  for (const Batch& batch : *init.loader) {
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs)), batch.targets,
                                            batch.loss_normaliser));
    init.engine->step();
    if (reports.size() == 2) break;
  }
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].memory_breakdown.empty());  // step 1 is not printed (steps_per_print 2)
  REQUIRE(reports[1].memory_breakdown.size() == 3);
  CHECK(reports[1].memory_breakdown[0].rfind("memory after forward | parameters ", 0) == 0);
  CHECK(reports[1].memory_breakdown[1].rfind("memory after backward | parameters ", 0) == 0);
  CHECK(reports[1].memory_breakdown[2].rfind("memory after step | parameters ", 0) == 0);
  // One process: nothing to reduce, so backward is all inner.
  const StepReport& r = reports[1];
  CHECK(r.times.backward_inner_ms + r.times.backward_allreduce_ms == Approx(r.times.backward_ms));
  // Two micro-steps: each has its own times, the step's are their sums, and only the last
  // micro-step ran the optimizer.
  REQUIRE(r.micro_step_times.size() == 2);
  CHECK(r.micro_step_times[0].forward_ms > 0);
  CHECK(r.micro_step_times[0].forward_ms + r.micro_step_times[1].forward_ms == Approx(r.times.forward_ms));
  CHECK(r.micro_step_times[0].backward_ms + r.micro_step_times[1].backward_ms == Approx(r.times.backward_ms));
  CHECK(r.micro_step_times[0].step_ms == 0);
  CHECK(r.micro_step_times[1].step_ms == Approx(r.times.step_ms));
  const std::vector<std::string> lines = Engine::format_timers(r);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("time (ms) | fwd_microstep: ", 0) == 0);
  CHECK(lines[1].find(" | bwd_allreduce_microstep: ") != std::string::npos);
  CHECK(lines[2].rfind("time (ms) | fwd: ", 0) == 0);
  CHECK(lines[2].find(" | bwd_inner: ") != std::string::npos);
}
